# The example programs' command lines as a new user meets them (issue 42): each test runs the real binary
# through run_cli.sh, which checks the exit code, the one line on stderr that names the flag, that no output
# folder or file is left behind, and the time (an up-front refusal: under a second). Included from
# examples/CMakeLists.txt once the programs are defined; each group only when its program is built.
set(SACCADE_CLI_RUN ${CMAKE_CURRENT_LIST_DIR}/run_cli.sh)
set(SACCADE_CLI_WORK ${PROJECT_BINARY_DIR}/tests/examples_cli)

# saccade_cli_test(NAME [run_cli.sh options] RC SECONDS -- COMMAND...): one CTest test "cli_NAME".
function(saccade_cli_test name)
  add_test(NAME cli_${name} COMMAND sh ${SACCADE_CLI_RUN} ${ARGN})
  set_tests_properties(cli_${name} PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300 LABELS cli)
endfunction()

# A refusal before any work: exit code 2 in under a second, the stderr line matching `err`.
function(saccade_cli_refusal name err)
  saccade_cli_test(${name} --err ${err} 2 1 -- ${ARGN})
endfunction()

if(TARGET gpt)
  set(gpt $<TARGET_FILE:gpt>)
  # item 5: unreadable range errors, and --help's contradictory defaults
  saccade_cli_refusal(gpt_train_stop_past_steps "^gpt: --stop-at: 9 is past --steps 5 \\(the run would end at step 5" ${gpt} train --steps 5 --stop-at 9 --out run)
  saccade_cli_refusal(gpt_steps_zero "^gpt: --steps: 0 is not allowed \\(need an integer >= 1\\)$" ${gpt} train --steps 0)
  saccade_cli_refusal(gpt_steps_abc "^gpt: --steps: 'abc' is not a number$" ${gpt} train --steps abc)
  saccade_cli_refusal(gpt_steps_fraction "^gpt: --steps: 2.5 is not an integer" ${gpt} train --steps 2.5)
  saccade_cli_refusal(gpt_threads_negative "^gpt: --threads: -1 is not allowed \\(need an integer from 0 to" ${gpt} train --threads -1)
  saccade_cli_test(gpt_help_defaults --out "--threads INT 0\\.\\.4096 +CPU threads \\(0: .*\\(default: 0\\)"
                   --out "--steps INT >= 1 .*\\(default: 1500\\)" --no-out "POSITIVE"
                   --out "--temperature .*only for the sample at the end of training" 0 1 -- ${gpt} train --help)
  # item 3: --eval-tokens 0 scored nothing and failed at the end
  saccade_cli_refusal(gpt_eval_tokens_zero "^gpt: --eval-tokens: 0 is not allowed \\(need -1 or an integer >= 1\\)$" ${gpt} train --eval-tokens 0)
  # item 9: the sampling flags are checked before the model loads
  saccade_cli_refusal(gpt_temperature_negative "^gpt: --temperature: -1 is not allowed \\(need a number >= 0\\)$" ${gpt} sample --temperature -1)
  saccade_cli_refusal(gpt_top_p_zero "^gpt: --top-p: 0 is not allowed \\(need a number > 0 and <= 1\\)$" ${gpt} sample --top-p 0)
  saccade_cli_refusal(gpt_top_p_two "^gpt: --top-p: 2 is not allowed" ${gpt} sample --top-p 2)
  saccade_cli_refusal(gpt_top_k_negative "^gpt: --top-k: -1 is not allowed \\(need an integer >= 0\\)$" ${gpt} sample --top-k -1)
  saccade_cli_refusal(gpt_attention_png_unwritable "^gpt: --attention-png: cannot write '/proc/x/a.png'" ${gpt} sample --checkpoint ${SACCADE_CLI_RUN} --attention-png /proc/x/a.png)
  saccade_cli_refusal(gpt_sample_no_checkpoint "^gpt: --out: 'gpt_out/best.safetensors' does not exist$" ${gpt} sample --prompt x)
  # item 14: a negative seed was taken as 2^64 - 1
  saccade_cli_refusal(gpt_seed_negative "^gpt: --seed: -1 is not allowed \\(need an integer >= 0\\)$" ${gpt} train --seed -1)
  # item 2 and others: flags that must agree, paths checked before any work
  saccade_cli_refusal(gpt_grad_accum "^gpt: --grad-accum: 3 does not divide --batch-size 32$" ${gpt} train --grad-accum 3)
  saccade_cli_refusal(gpt_out_unwritable "^gpt: --out: cannot make the folder '/proc/x/y'" ${gpt} train --out /proc/x/y)
  # programs started side by side (as CTest runs these) whose --out folders share a missing parent: the
  # writability check made and removed the parent, and failed with "Directory not empty" (a CI failure)
  add_test(NAME cli_gpt_out_side_by_side
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/concurrent_out.sh 100 -- ${gpt} train --context 60000 --batch-size 4096)
  set_tests_properties(cli_gpt_out_side_by_side PROPERTIES TIMEOUT 300 LABELS cli)
  # item 14: a context that cannot fit took gigabytes for 40 s before anything was said
  saccade_cli_refusal(gpt_context_too_large "^gpt: --context: a step of 32 windows of 65536 tokens would hold about [0-9]+ GB of activations, more than this machine's"
                      ${gpt} train --context 65536 --d-model 4096 --n-head 4 --n-layer 64)
  saccade_cli_refusal(gpt_curves_missing_log "^gpt: logs: 'missing.csv' does not exist$" ${gpt} curves missing.csv)
  # item 6: an empty series is refused, not drawn as an empty picture (a lone score is drawn as a dot:
  # cli_gpt_curves_one_point)
  saccade_cli_refusal(gpt_curves_no_validation "^gpt: logs: '.*log_without_validation.csv' holds no validation score: nothing to draw$"
                      ${gpt} curves ${CMAKE_CURRENT_LIST_DIR}/log_without_validation.csv --png c.png)
  saccade_cli_refusal(gpt_curves_labels "^gpt: --label: 1 label for 2 logs \\(give one per log, or none\\)$"
                      ${gpt} curves ${CMAKE_CURRENT_LIST_DIR}/log_without_validation.csv
                      ${CMAKE_CURRENT_LIST_DIR}/log_without_validation.csv --label a --png c.png)
  if(NOT SACCADE_WITH_CUDA)
    # item 11: the prefix was doubled ("gpt: gpt: --device cuda asked for ...")
    saccade_cli_refusal(gpt_device_cuda "^gpt: --device: cuda asked for, but" ${gpt} train --device cuda)
  endif()

  # issue 49 item 21: a mistyped command or option is named first, with the nearest name
  saccade_cli_refusal(gpt_command_typo "^gpt: trian: not a command \\(did you mean train\\?\\) \\(the commands: train, sample, eval, finetune, export, curves\\)$" ${gpt} trian)
  saccade_cli_refusal(gpt_option_typo "^gpt: --step: not an option \\(did you mean --steps\\?\\)$" ${gpt} train --step 5)
  # ... the real limit of a seed, and numbers past double's range said as not finite
  saccade_cli_refusal(gpt_seed_too_large "^gpt: --seed: 9223372036854775808 is out of range \\(need an integer >= 0. the largest allowed is 9223372036854775807\\)$"
                      ${gpt} train --seed 9223372036854775808)
  saccade_cli_test(gpt_help_seed --out "--seed INT 0\\.\\.2\\^63-1 " --no-out "UINT" 0 1 -- ${gpt} train --help)
  saccade_cli_refusal(gpt_temperature_inf "^gpt: --temperature: inf is not allowed \\(must be finite\\)$" ${gpt} sample --temperature inf)
  saccade_cli_refusal(gpt_lr_huge "^gpt: --lr: 1e400 is not allowed \\(must be finite\\)$" ${gpt} train --lr 1e400)
  # ... what a file given as --checkpoint is: a CSV is not a safetensors file
  saccade_cli_test(gpt_checkpoint_csv --err "^gpt: .*'.*log_without_validation.csv': not a safetensors file \\(it begins like a text file: \"step,sec\"\\)"
                   1 10 -- ${gpt} sample --checkpoint ${CMAKE_CURRENT_LIST_DIR}/log_without_validation.csv --prompt x)
  # ... and --help says which flags do not go together (--num-samples excludes --hf)
  if(TARGET saccade_hf)
    saccade_cli_test(gpt_help_excludes --out "--num-samples .*\\(not with --hf\\)" 0 1 -- ${gpt} sample --help)
  endif()
  saccade_cli_refusal(gpt_device_unknown "^gpt: --device: expected 'cpu', 'cuda' or 'cuda:N', got 'tpu'$" ${gpt} train --device tpu)
  saccade_cli_refusal(gpt_profile_unwritable "^gpt: --profile: cannot write" ${gpt} train --profile /nonexistent/t.json)

  # the tests that train or read the fortunes: only where Debian's fortunes are installed (scripts/setup)
  if(EXISTS "/usr/share/games/fortunes/fortunes")
    saccade_cli_test(gpt_vocab_size_too_small --err "^gpt: --vocab-size: 260 is not allowed \\(need an integer >= [0-9]+ for this training stream"
                     2 10 -- ${gpt} train --tokenizer bpe --vocab-size 260)

    # A tiny training run (a few seconds) that the tests below read from: its checkpoints are the fixture.
    set(run ${SACCADE_CLI_WORK}/gpt_tiny)
    set(tiny --steps 3 --batch-size 2 --context 16 --n-layer 1 --n-head 2 --d-model 16 --eval-every 0
             --eval-tokens 256 --sample-tokens 8 --threads 2)
    # item 12: the last lines say why the run ended and where its outputs went
    add_test(NAME cli_gpt_tiny_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${run})
    saccade_cli_test(gpt_tiny_train --out "^trained steps 1-3 in .*: reached --steps 3$" --out "^step 3/3 .* avg loss [0-9.]+ "
                     --out "^final training loss .* the mean of the last 3 steps"
                     --out "^outputs in ${run}: last.safetensors"
                     --out "^--resume: no checkpoint at ${run}/last.safetensors: starting a fresh run$"
                     --keep 0 120 -- ${gpt} train ${tiny} --out ${run} --resume)
    set_tests_properties(cli_gpt_tiny_clean PROPERTIES FIXTURES_SETUP gpt_tiny_clean)
    set_tests_properties(cli_gpt_tiny_train PROPERTIES FIXTURES_SETUP gpt_tiny FIXTURES_REQUIRED gpt_tiny_clean)
    # item 8: a resume past --steps says there is nothing to train
    saccade_cli_test(gpt_resume_nothing_to_train
                     --out "^resumed from ${run}/last.safetensors at step 3$"
                     --out "^the checkpoint is at step 3, reached --steps 2: nothing to train"
                     --keep 0 120 -- ${gpt} train ${tiny} --steps 2 --out ${run} --resume)
    # item 4: export onto the checkpoint it reads replaced the training checkpoint
    saccade_cli_refusal(gpt_export_onto_itself "^gpt: --to: '.*best.safetensors' is the file being read"
                        ${gpt} export --checkpoint ${run}/best.safetensors --to ${run}/./best.safetensors)
    saccade_cli_test(gpt_export_and_sample --out "^wrote exported.safetensors" --keep 0 60 --
                     sh -c "${gpt} export --checkpoint ${run}/best.safetensors --to exported.safetensors && ${gpt} sample --checkpoint exported.safetensors --prompt x --max-new-tokens 4")
    if(TARGET saccade_hf)
      # issue 41: our own checkpoint in the Hugging Face GPT-2 layout, with a byte-level tokenizer.json
      saccade_cli_test(gpt_export_hf --out "^wrote hf: .* in the Hugging Face layout" --out "^ids:( [0-9]+){4}$" --keep 0 60 --
                       sh -c "${gpt} export --checkpoint ${run}/best.safetensors --hf hf && ${gpt} sample --hf hf --prompt abc --max-new-tokens 4 --print-ids")
      set_tests_properties(cli_gpt_export_hf PROPERTIES FIXTURES_REQUIRED gpt_tiny)
    endif()
    saccade_cli_refusal(gpt_export_nowhere "^gpt: --to: give the file to write \\(or --hf FOLDER\\)$" ${gpt} export --checkpoint x)
    saccade_cli_refusal(gpt_export_nothing "^gpt: --checkpoint: give the checkpoint to read$" ${gpt} export --to x)
    saccade_cli_refusal(gpt_sample_tokenizer_for_bytes "^gpt: --tokenizer: the model in .* reads byte tokens"
                        ${gpt} sample --checkpoint ${run}/best.safetensors --tokenizer ${SACCADE_CLI_RUN} --prompt x)
    # item 9: --attention-layer was checked after the whole sample
    saccade_cli_refusal(gpt_attention_layer "^gpt: --attention-layer: 9 is not allowed \\(need an integer from -1 to 0: the model has 1 blocks\\)$"
                        ${gpt} sample --checkpoint ${run}/best.safetensors --attention-layer 9 --attention-png a.png --prompt x)
    # item 6: a log with one validation score drew an empty picture
    saccade_cli_test(gpt_curves_one_point --out "^wrote c.png$" --keep 0 10 --
                     ${gpt} curves ${run}/log.csv --png c.png)
    # issue 38 item 7: a run that ended before the profile's last step (4) kept recording through the final
    # validation and the sample: "profile of 2 step(s)" held 21 linear calls and a masked_softmax. One layer
    # makes per step one loss, one attention and 7 linear (W_q, W_k, W_v, W_o, the MLP's two, the tied LM
    # head): 2 steps, twice that.
    saccade_cli_test(gpt_profile_steps_only --keep --out "^profile of 2 step[(]s[)] [(]after 1[)]"
                     --out "^cross_entropy +2 " --out "^flash_attention +2 " --out "^linear +14 "
                     --no-out "^masked_softmax" 0 60 --
                     ${gpt} train --steps 3 --batch-size 2 --context 16 --n-layer 1 --n-head 2 --d-model 16
                     --eval-every 1000 --eval-tokens 256 --sample-tokens 8 --threads 2 --profile p.json --out run)
    # issue 38 item 7: the OpenBLAS-core warning came at the first GEMM, in the middle of the prompt's line.
    # Prescott's kernels are narrower than any AVX2 CPU's, so the warning is given there.
    file(READ /proc/cpuinfo cpuinfo LIMIT 65536)
    if(cpuinfo MATCHES " avx2 ")
      saccade_cli_test(gpt_blas_warning_first --out "^saccade: OpenBLAS runs its Prescott kernels" --no-out ".saccade: OpenBLAS"
                       --first "^saccade: OpenBLAS runs its Prescott kernels" 0 60 --
                       sh -c "OPENBLAS_CORETYPE=Prescott ${gpt} sample --checkpoint ${run}/best.safetensors --prompt 'The best way to' --max-new-tokens 4 2>&1")
      set_tests_properties(cli_gpt_blas_warning_first PROPERTIES FIXTURES_REQUIRED gpt_tiny)
    endif()
    set_tests_properties(cli_gpt_resume_nothing_to_train cli_gpt_export_onto_itself cli_gpt_export_and_sample
                         cli_gpt_sample_tokenizer_for_bytes cli_gpt_attention_layer cli_gpt_curves_one_point
                         PROPERTIES FIXTURES_REQUIRED gpt_tiny)
    # item 12: a run that the time limit ended said nothing of it, and its bar ended at "step 25/1000 ... 2%"
    # (counted against --steps): the last bar line is printed, at 100% of the time limit
    saccade_cli_test(gpt_time_limit_ends_run --out "^trained steps 1-[0-9]+ in .*: the --time-limit of 0.001 s ended the run$"
                     --out "^step [0-9]+/100000 \\[=+\\] 100% of --time-limit  avg loss [0-9.]+ .* of 0.001 s$"
                     --no-out "^step .*/100000 .* [0-9]?[0-9]%  avg loss"
                     --keep 0 60 -- ${gpt} train ${tiny} --steps 100000 --time-limit 0.001 --out t)
    saccade_cli_test(gpt_stop_at_ends_run --out "^trained steps 1-1 in .*: stopped at --stop-at 1$"
                     --keep 0 60 -- ${gpt} train ${tiny} --stop-at 1 --out s)
    # item 4: a bpe model exported or copied to another folder could not be sampled
    set(bpe ${SACCADE_CLI_WORK}/gpt_tiny_bpe)
    add_test(NAME cli_gpt_bpe_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${bpe})
    saccade_cli_test(gpt_bpe_train --out "^outputs in ${bpe}:" --keep 0 120 --
                     ${gpt} train ${tiny} --tokenizer bpe --vocab-size 400 --out ${bpe})
    set_tests_properties(cli_gpt_bpe_clean PROPERTIES FIXTURES_SETUP gpt_bpe_clean)
    set_tests_properties(cli_gpt_bpe_train PROPERTIES FIXTURES_SETUP gpt_bpe FIXTURES_REQUIRED gpt_bpe_clean)
    saccade_cli_test(gpt_bpe_export_elsewhere --out "^wrote moved/tokenizer.model" --out "^gpt: .*[(]bpe[)].*, from moved/m.safetensors"
                     --keep 0 60 -- sh -c "mkdir moved && ${gpt} export --checkpoint ${bpe}/best.safetensors --to moved/m.safetensors && ${gpt} sample --checkpoint moved/m.safetensors --prompt x --max-new-tokens 4")
    saccade_cli_test(gpt_bpe_sample_tokenizer_flag --out "^gpt: .*[(]bpe[)].*, from copy.safetensors" --keep 0 60 --
                     sh -c "cp ${bpe}/best.safetensors copy.safetensors && ${gpt} sample --checkpoint copy.safetensors --tokenizer ${bpe}/tokenizer.model --prompt x --max-new-tokens 4")
    saccade_cli_test(gpt_bpe_sample_without_tokenizer --err "^gpt: --tokenizer: the model in 'copy.safetensors' needs its bpe tokenizer, and there is no './tokenizer.model'"
                     --keep 2 10 -- sh -c "cp ${bpe}/best.safetensors copy.safetensors && ${gpt} sample --checkpoint copy.safetensors --prompt x")
    set_tests_properties(cli_gpt_bpe_export_elsewhere cli_gpt_bpe_sample_tokenizer_flag cli_gpt_bpe_sample_without_tokenizer
                         PROPERTIES FIXTURES_REQUIRED gpt_bpe)
    # issue 49 item 6: two runs wrote one --out at once; item 20: Ctrl-C left last.safetensors.tmp and no
    # loss.png. A second run is refused while the first holds the folder; SIGINT stops the first after its
    # step, saved, and --resume continues it (train_interrupt.sh)
    add_test(NAME cli_gpt_lock_and_interrupt
             COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/train_interrupt.sh ${gpt} --batch-size 2 --context 16 --n-layer 1
                     --n-head 2 --d-model 16 --eval-every 0 --eval-tokens 256 --sample-tokens 0 --threads 2)
    set_tests_properties(cli_gpt_lock_and_interrupt PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 300 LABELS cli
                         SKIP_RETURN_CODE 77)
    # issue 49 item 7: --profile p3.png overwrote its trace with the PNG summary
    saccade_cli_test(gpt_profile_png_name --keep --out "^trace: p3.png .*summary: p3.summary.png$" 0 60 --
                     sh -c "${gpt} train --steps 3 --batch-size 2 --context 16 --n-layer 1 --n-head 2 --d-model 16 --eval-every 0 --eval-tokens 256 --sample-tokens 0 --threads 2 --profile p3.png --out run && grep -q traceEvents p3.png")
  endif()
  # issue 49 item 7: a --profile folder was taken, and the run died at step 4 leaving prof1.partial
  saccade_cli_test(gpt_profile_folder --err "^gpt: --profile: cannot write the trace file 'prof1' \\(it is a folder\\)$"
                   --keep 2 1 -- sh -c "mkdir prof1 && ${gpt} train --profile prof1 --data /nonexistent")
  # issue 49 item 19: a data folder whose validation split came out empty (or too small a folder) trained
  # every step, then failed
  saccade_cli_test(gpt_data_no_validation --err "^gpt: --data: the validation split of 'd' is 0 documents, 0 bytes: too small to score"
                   --keep 2 5 -- sh -c "mkdir d && printf 'A\n' >d/fortunes && ${gpt} train --data d --steps 2 --batch-size 2 --context 16 --n-layer 1 --n-head 2 --d-model 16 --threads 2")
  saccade_cli_test(gpt_data_tiny --err "^gpt: --data: the training split of 'd' is 1 document, 4 bytes: shorter than one window of --context 16 \\+ 1 tokens$"
                   --keep 2 5 -- sh -c "mkdir d && printf 'A\n%%\nN\n' >d/fortunes && ${gpt} train --data d --steps 2 --batch-size 2 --context 16 --n-layer 1 --n-head 2 --d-model 16 --threads 2")
  # item 11: with `> log 2>&1` the header lines come before the error
  saccade_cli_test(gpt_log_order --first "^device cpu" --err "^gpt: fortune_files: " 1 10 -- ${gpt} train --data ${CMAKE_CURRENT_LIST_DIR})
  saccade_cli_refusal(gpt_data_missing "^gpt: --data: '/nonexistent/fortunes' does not exist [(]the fortunes: install Debian's" ${gpt} train --data /nonexistent/fortunes)

  # issue 40: the Llama-style block (--arch llama): trains, samples from its checkpoint with no flags; refusals
  if(EXISTS "/usr/share/games/fortunes/fortunes")
    saccade_cli_test(gpt_llama_train_sample --keep --out "^llama: 1 layers, 4 heads \\(2 key/value\\), d_model 16, SwiGLU 48.*, window 8, [0-9]+ parameters$"
                     --out "^---$" 0 60 -- sh -c "${gpt} train --arch llama --n-kv-head 2 --rope-theta 500 --window 8 --steps 3 --batch-size 2 --context 16 --n-layer 1 --n-head 4 --d-model 16 --eval-every 0 --eval-tokens 256 --sample-tokens 8 --threads 2 --out run && ${gpt} sample --checkpoint run/best.safetensors --prompt x --max-new-tokens 4")
  endif()
  saccade_cli_refusal(gpt_kv_head_gpt2 "^gpt: --n-kv-head: not for --arch gpt2 [(]learned positions, full attention[)]$" ${gpt} train --n-kv-head 2)
  saccade_cli_refusal(gpt_window_gpt2 "^gpt: --window: not for --arch gpt2 [(]learned positions, full attention[)]$" ${gpt} train --window 8)
  saccade_cli_refusal(gpt_kv_head_divides "^gpt: --n-kv-head: 3 does not divide --n-head 4$" ${gpt} train --arch llama --n-kv-head 3)
  saccade_cli_refusal(gpt_llama_odd_head "^gpt: --n-head: the head size --d-model / --n-head = 3 is odd" ${gpt} train --arch llama --d-model 12 --n-head 4)
  if(EXISTS "/usr/share/games/fortunes/fortunes")
    saccade_cli_test(gpt_qwen3_checkpointing --keep --out "^qwen3 recomputed ok$" 0 120 -- sh ${CMAKE_CURRENT_LIST_DIR}/train_checkpointing.sh ${gpt} qwen3)
  endif()
  saccade_cli_refusal(gpt_arch_unknown "^gpt: --arch: " ${gpt} train --arch mamba)

  # issue 41: Hugging Face model folders (tests/data/hf_gpt2, hf_llama: tests/fixtures/make_hf_*.py). The numbers
  # themselves are checked against transformers in tests/test_hf_gpt2.cpp; here, the command lines.
  if(TARGET saccade_hf)
    set(hf_data ${PROJECT_SOURCE_DIR}/tests/data)
    saccade_cli_test(gpt_hf_eval --out "^gpt2: 2 layers, 4 heads, hidden 32, context 32, vocab 991" --out "^tokens [0-9]+$"
                     --out "^loss [0-9.]+$" --out "^bits_per_byte [0-9.]+$" 0 10 --
                     ${gpt} eval --hf ${hf_data}/hf_gpt2 --data ${hf_data}/hf_eval.txt --threads 2)
    saccade_cli_test(gpt_hf_sample_llama --out "^llama: 2 layers, 4 heads \\(2 key/value\\)" --out "^---$"
                     --out "^ids:( [0-9]+){12}$" --out "^generated 12 tokens after a prompt of [0-9]+ in .* tokens/s"
                     0 10 -- ${gpt} sample --hf ${hf_data}/hf_llama --prompt "A fortune" --max-new-tokens 12
                     --temperature 0 --print-ids --threads 2)
    saccade_cli_test(gpt_hf_sample_gpt2_long_prompt --out "^generated 4 tokens after a prompt of 32 in"
                     --err "^gpt: the prompt has [0-9]+ tokens, more than the context of 32: kept its last 32$" 0 10 --
                     ${gpt} sample --hf ${hf_data}/hf_gpt2 --prompt "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty twenty-one"
                     --max-new-tokens 4 --threads 2)
    saccade_cli_test(gpt_hf_sample_bf16 --out "^ids:( [0-9]+){6}$" 0 10 -- ${gpt} sample --hf ${hf_data}/hf_gpt2
                     --prompt "A fortune" --max-new-tokens 6 --dtype bf16 --print-ids --threads 2)
    # issue 53: weights kept in Q8_0 (their numbers against float32: tests/test_hf_gpt2.cpp, test_quant.cpp)
    saccade_cli_test(gpt_hf_sample_q8_0 --out "^quantized 15 matrices to q8_0 \\([0-9.]+ MB of blocks\\)$"
                     --out "^ids:( [0-9]+){8}$" 0 10 -- ${gpt} sample --hf ${hf_data}/hf_llama --quantize q8_0
                     --prompt "A fortune" --max-new-tokens 8 --temperature 0 --print-ids --threads 2)
    saccade_cli_test(gpt_hf_eval_q8_0 --out "^quantized 13 matrices to q8_0" --out "^loss [0-9.]+$" 0 10 --
                     ${gpt} eval --hf ${hf_data}/hf_gpt2 --data ${hf_data}/hf_eval.txt --quantize q8_0 --threads 2)
    saccade_cli_refusal(gpt_quantize_unknown "^gpt: --quantize: " ${gpt} sample --hf ${hf_data}/hf_llama --quantize q4_0)
    # GGUF files in place of a folder (tests/data/gguf: tests/fixtures/make_gguf.py; their logits, blocks and
    # vocabularies against the folders' in tests/test_hf_gguf.cpp)
    saccade_cli_test(gpt_hf_sample_gguf_q8_0
                     --out "^llama: 2 layers, 4 heads \\(2 key/value\\), hidden 32, context 64, vocab 993, tokenizer hf::BPE .*llama_q8_0.gguf"
                     --out "^ids:( [0-9]+){8}$" 0 10 -- ${gpt} sample --hf ${hf_data}/gguf/llama_q8_0.gguf
                     --prompt "A fortune" --max-new-tokens 8 --temperature 0 --print-ids --threads 2)
    saccade_cli_test(gpt_hf_eval_gguf --out "^loss [0-9.]+$" 0 10 -- ${gpt} eval --hf ${hf_data}/gguf/llama_bf16.gguf
                     --data ${hf_data}/hf_eval.txt --threads 2)
    saccade_cli_test(gpt_hf_sample_gguf_gpt2 --out "^gpt2: 2 layers, 4 heads, hidden 32, context 32, vocab 991"
                     --out "^ids:( [0-9]+){6}$" 0 10 -- ${gpt} sample --hf ${hf_data}/gguf/gpt2_f32.gguf
                     --prompt "A fortune" --max-new-tokens 6 --temperature 0 --print-ids --threads 2)
    saccade_cli_test(gpt_hf_finetune_gguf --keep --out "^LoRA r 4, lora_alpha 8 on 4 modules: [0-9]+ trainable parameters of [0-9]+$"
                     --out "^LoRA adapter from run/adapter: r 4, lora_alpha 8, 4 modules$" --out "^ids:( [0-9]+){3}$" 0 60 --
                     sh -c "${gpt} finetune --hf ${hf_data}/gguf/llama_q8_0.gguf --data ${hf_data}/hf_instruct.jsonl --lora-r 4 --lora-alpha 8 --steps 2 --batch-size 2 --threads 2 --out run && ${gpt} sample --hf ${hf_data}/gguf/llama_q8_0.gguf --adapter run/adapter --prompt x --max-new-tokens 3 --temperature 0 --print-ids --threads 2")
    saccade_cli_refusal(gpt_hf_gguf_missing "^gpt: --hf: '/nonexistent/model.gguf' does not exist" ${gpt} sample --hf /nonexistent/model.gguf)
    # issue 52: a LoRA adapter in PEFT's layout (tests/data/hf_llama_lora: tests/fixtures/make_hf_peft.py; its
    # logits against PEFT's in tests/test_hf_peft.cpp)
    saccade_cli_test(gpt_hf_sample_adapter --out "^LoRA adapter from .*hf_llama_lora: r 4, lora_alpha 8, 6 modules$"
                     --out "^ids:( [0-9]+){8}$" 0 10 -- ${gpt} sample --hf ${hf_data}/hf_llama --adapter
                     ${hf_data}/hf_llama_lora --prompt "A fortune" --max-new-tokens 8 --temperature 0 --print-ids
                     --threads 2)
    saccade_cli_test(gpt_hf_adapter_other_base --err "^gpt: hf::load_adapter: the adapter in '.*hf_llama_lora' was trained on 'hf_llama', not on '.*hf_gpt2'$" 1 10 -- ${gpt} sample --hf ${hf_data}/hf_gpt2 --adapter ${hf_data}/hf_llama_lora)
    saccade_cli_refusal(gpt_adapter_without_hf "^gpt: --adapter requires --hf$" ${gpt} sample --adapter x)
    saccade_cli_refusal(gpt_hf_adapter_missing "^gpt: --adapter: '/nonexistent/adapter' does not exist" ${gpt} eval --hf ${hf_data}/hf_llama --data ${hf_data}/hf_eval.txt --adapter /nonexistent/adapter)
    # LoRA fine-tuning on a committed JSONL file (tests/data/hf_instruct.jsonl), then sampling with the adapter
    saccade_cli_test(gpt_hf_finetune_lora --keep --out "^10 training examples \\([0-9]+ scored tokens\\), 10 validation examples$"
                     --out "^LoRA r 4, lora_alpha 8 on 4 modules: [0-9]+ trainable parameters of [0-9]+$"
                     --out "^step 3: validation loss [0-9.]+ \\(completion tokens\\)$" --out "^trained in [0-9.]+ s. wrote run/adapter \\(PEFT's layout.*\\), run/log.csv"
                     --out "^LoRA adapter from run/adapter: r 4, lora_alpha 8, 4 modules$" 0 60 --
                     sh -c "${gpt} finetune --hf ${hf_data}/hf_llama --data ${hf_data}/hf_instruct.jsonl --val ${hf_data}/hf_instruct.jsonl --lora-r 4 --lora-alpha 8 --steps 3 --batch-size 2 --threads 2 --out run && test -f run/adapter/adapter_config.json && test \"$(wc -l < run/log.csv)\" = 4 && ${gpt} sample --hf ${hf_data}/hf_llama --adapter run/adapter --prompt x --max-new-tokens 2 --threads 2")
    # a run stopped (--stop-at) and resumed (--resume) in one --out: the log holds every step once; a resume
    # with another --seed is refused (exit 1) and the run's files stay as they were
    set(ft_args --hf ${hf_data}/hf_llama --data ${hf_data}/hf_instruct.jsonl --lora-r 4 --steps 4 --batch-size 2 --eval-every 2 --threads 2 --out run)
    string(REPLACE ";" " " ft_args "${ft_args}")
    saccade_cli_test(gpt_hf_finetune_resume --keep --out "^stopped at step 2 as --stop-at asked: continue with --resume$"
                     --out "^resumed from run/last.safetensors at step 2$" --out "^step 4/4: loss"
                     --err "^gpt: finetune_lora: --resume: 'run/last.safetensors' was made with --seed 0, not 3: resume with the run's own settings$" 0 120 --
                     sh -c "${gpt} finetune ${ft_args} --stop-at 2 && ${gpt} finetune ${ft_args} --resume && test \"$(wc -l < run/log.csv)\" = 5 && cp run/last.safetensors kept && ! ${gpt} finetune ${ft_args} --resume --seed 3 && cmp run/last.safetensors kept")
    # a packed run resumed unpacked is refused (its sums would differ) and its files stay as they were
    saccade_cli_test(gpt_hf_finetune_resume_pack --keep --out "^resumed from run/last.safetensors at step 2$"
                     --err "^gpt: finetune_lora: --resume: 'run/last.safetensors' was made with rows packed to 64 tokens, not unpacked rows: resume with the run's own --pack$" 0 120 --
                     sh -c "${gpt} finetune ${ft_args} --pack --stop-at 2 && cp run/last.safetensors kept && ! ${gpt} finetune ${ft_args} --resume && cmp run/last.safetensors kept && ${gpt} finetune ${ft_args} --pack --resume")
    # --pack: the padded run's losses, each step's examples packed into rows of the context
    saccade_cli_test(gpt_hf_finetune_pack --keep --out "^packing each step's examples into rows of 64 tokens"
                     --out "^packed ok$" 0 120 -- sh ${CMAKE_CURRENT_LIST_DIR}/finetune_pack.sh ${gpt} ${hf_data}/hf_llama ${hf_data}/hf_instruct.jsonl)
    # --dtype bf16: a bfloat16 base with float32 adapters trains as the float32 run does
    saccade_cli_test(gpt_hf_finetune_bf16 --keep --out "^the base in bfloat16, the adapters in float32$"
                     --out "^bf16 ok$" 0 120 -- sh ${CMAKE_CURRENT_LIST_DIR}/finetune_bf16.sh ${gpt} ${hf_data}/hf_llama ${hf_data}/hf_instruct.jsonl)
    # gpt export --merge: the adapter folded into a plain folder that samples what base + adapter sample
    saccade_cli_test(gpt_hf_export_merged --keep --out "^wrote merged: .*hf_llama with the adapter .*hf_llama_lora merged into 6 modules \\(float32"
                     --out "^merged ok$" 0 60 -- sh ${CMAKE_CURRENT_LIST_DIR}/export_merged.sh ${gpt} ${hf_data}/hf_llama ${hf_data}/hf_llama_lora)
    saccade_cli_refusal(gpt_export_adapter_without_merge "^gpt: --adapter: add --merge: the export folds the adapter" ${gpt} export --from-hf ${hf_data}/hf_llama --adapter ${hf_data}/hf_llama_lora --hf merged)
    saccade_cli_refusal(gpt_export_merge_onto_base "^gpt: --hf: '.*hf_llama/.' is the folder --from-hf reads: export to another folder$" ${gpt} export --from-hf ${hf_data}/hf_llama --adapter ${hf_data}/hf_llama_lora --merge --hf ${hf_data}/hf_llama/.)
    saccade_cli_refusal(gpt_export_merge_onto_adapter "^gpt: --hf: '.*hf_llama_lora/.' is the folder --adapter reads: export to another folder$" ${gpt} export --from-hf ${hf_data}/hf_llama --adapter ${hf_data}/hf_llama_lora --merge --hf ${hf_data}/hf_llama_lora/.)
    saccade_cli_refusal(gpt_export_merge_without_from_hf "^gpt: --adapter: merges a LoRA adapter into a Hugging Face folder: give --from-hf DIR$" ${gpt} export --adapter x --merge --hf merged)
    # GPT-2: PEFT's adapter (c_attn fused on disk) merged; fine-tuning with dropout, with and without recomputation
    saccade_cli_test(gpt_hf_export_merged_gpt2 --keep --out "^wrote merged: .*hf_gpt2 with the adapter .*hf_gpt2_lora merged into 8 modules \\(float32"
                     --out "^merged ok$" 0 60 -- sh ${CMAKE_CURRENT_LIST_DIR}/export_merged.sh ${gpt} ${hf_data}/hf_gpt2 ${hf_data}/hf_gpt2_lora)
    saccade_cli_test(gpt_hf_finetune_gpt2 --keep --out "^LoRA r 4, lora_alpha 8 on 2 modules: 1024 trainable parameters of [0-9]+$"
                     --out "^gpt2 ok$" 0 120 -- sh ${CMAKE_CURRENT_LIST_DIR}/finetune_gpt2.sh ${gpt} ${hf_data}/hf_gpt2 ${hf_data}/hf_instruct.jsonl)
    # GPT-2 packed: its learned positions restart at each document; the padded run's losses, recomputed too
    saccade_cli_test(gpt_hf_finetune_gpt2_pack --keep --out "^packing each step's examples into rows of 32 tokens"
                     --out "^packed ok$" 0 120 -- sh ${CMAKE_CURRENT_LIST_DIR}/finetune_pack.sh ${gpt} ${hf_data}/hf_gpt2 ${hf_data}/hf_instruct.jsonl)
    saccade_cli_test(gpt_finetune_gpt2_target --err "^gpt: apply_lora: target 'q_proj' matches no Linear module. the model's Linear modules are named c_attn, c_fc, c_proj$" 1 10 -- ${gpt} finetune --hf ${hf_data}/hf_gpt2 --data ${hf_data}/hf_instruct.jsonl --lora-targets q_proj --truncate right --out run)
    # errors found once the model is read: exit 1, and the --out folder the run made is gone again
    saccade_cli_test(gpt_finetune_target --err "^gpt: apply_lora: target 'qkv' matches no Linear module. the model's Linear modules are named down_proj, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj$" 1 10 -- ${gpt} finetune --hf ${hf_data}/hf_llama --data ${hf_data}/hf_instruct.jsonl --lora-targets q_proj,qkv --out run)
    # --out on the --hf folder wrote the adapter, the log and the checkpoint among the model's files
    saccade_cli_test(gpt_finetune_out_onto_model --err "^gpt: --out: './m/' is the folder --hf reads: write the run to another folder$"
                     --keep 2 5 -- sh -c "cp -r ${hf_data}/hf_llama m && ls -A m > before && ${gpt} finetune --hf m --data ${hf_data}/hf_instruct.jsonl --out ./m/ --steps 1; rc=$?; ls -A m | cmp -s - before && exit $rc")
    saccade_cli_test(gpt_finetune_bad_jsonl --err "^gpt: read_jsonl: '.*/tests/data/hf_eval.txt' line 1: not a JSON object$" 1 10 -- ${gpt} finetune --hf ${hf_data}/hf_llama --data ${hf_data}/hf_eval.txt --out run)
    if(EXISTS "/usr/share/games/fortunes/fortunes")
      # issue 51: a fresh model of a row (--arch qwen3, gemma3_text, olmoe) trains, resumes, samples from its
      # checkpoint, and its --save-hf folder (the row's layout, a byte-level tokenizer.json) scores again
      foreach(row qwen3 gemma3_text olmoe)
        saccade_cli_test(gpt_arch_${row} --keep --out "^${row}: 2 layers, 4 heads [(]2 key/value[)], d_model 16, .* [0-9]+ parameters$"
                         --out "^---$" --out "^tokens [0-9]+$" 0 90 -- sh -c "${gpt} train --arch ${row} --n-kv-head 2 --steps 2 --batch-size 2 --context 16 --n-layer 2 --n-head 4 --d-model 16 --eval-every 0 --eval-tokens 64 --sample-tokens 0 --threads 2 --out run --stop-at 1 && ${gpt} train --arch ${row} --n-kv-head 2 --steps 2 --batch-size 2 --context 16 --n-layer 2 --n-head 4 --d-model 16 --eval-every 0 --eval-tokens 64 --sample-tokens 0 --threads 2 --out run --resume --save-hf hf && grep -q '\"model_type\": \"${row}\"' hf/config.json && ${gpt} sample --checkpoint run/best.safetensors --prompt x --max-new-tokens 4 && ${gpt} eval --hf hf --data ${hf_data}/hf_eval.txt --threads 2")
      endforeach()
    endif()
    saccade_cli_refusal(gpt_arch_row_window "^gpt: --arch: GPTConfig: a 'qwen2' cannot window every layer by 8" ${gpt} train --arch qwen2 --window 8 --steps 1)
    # --stop-at past --steps would never stop the run: refused before any work, in both commands
    saccade_cli_refusal(gpt_finetune_stop_past_steps "^gpt: --stop-at: 12 is past --steps 10" ${gpt} finetune --hf ${hf_data}/hf_llama --data ${hf_data}/hf_instruct.jsonl --steps 10 --stop-at 12 --out run)
    saccade_cli_refusal(gpt_dtype_without_hf "^gpt: --dtype requires --hf$" ${gpt} sample --dtype bf16)
    saccade_cli_refusal(gpt_non_strict_without_hf "^gpt: --non-strict requires --hf$" ${gpt} sample --non-strict)
    saccade_cli_refusal(gpt_hf_missing "^gpt: --hf: '/nonexistent/model' does not exist" ${gpt} sample --hf /nonexistent/model)
    saccade_cli_refusal(gpt_hf_no_config "^gpt: --hf: '.*/tests/data/hf_tok/config.json' does not exist" ${gpt} eval --hf ${hf_data}/hf_tok --data ${hf_data}/hf_eval.txt)
    saccade_cli_refusal(gpt_hf_with_checkpoint "^gpt: --checkpoint excludes --hf$" ${gpt} sample --hf ${hf_data}/hf_gpt2 --checkpoint x)
    saccade_cli_refusal(gpt_hf_eval_no_data "^gpt: .*--data is required" ${gpt} eval --hf ${hf_data}/hf_gpt2)
    # fine-tuning a GPT-2 folder and writing the result back in its layout (transformers reads it: checked by
    # hand with transformers 5.24, the README says how); then the written folder samples and scores
    if(EXISTS "/usr/share/games/fortunes/fortunes")
      # (issue 49 item 3: without --context the saved config keeps the folder's context, 32)
      saccade_cli_test(gpt_hf_finetune --keep --out "^initialised from .*hf_gpt2 \\(gpt2: 2 layers" --out "^wrote hf: the best model"
                       --out "^tokens [0-9]+$" 0 60 -- sh -c "${gpt} train --init-from-hf ${hf_data}/hf_gpt2 --steps 3 --batch-size 2 --eval-every 0 --eval-tokens 256 --sample-tokens 8 --threads 2 --out run --save-hf hf && grep -q '\"n_positions\": 32' hf/config.json && ${gpt} eval --hf hf --data ${hf_data}/hf_eval.txt --threads 2")
      # issue 49: a run fine-tuned from a Hugging Face folder, the fixture of the tests below
      set(ft ${SACCADE_CLI_WORK}/gpt_hf_ft)
      add_test(NAME cli_gpt_hf_ft_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${ft})
      saccade_cli_test(gpt_hf_ft_train --out "^outputs in ${ft}:" --keep 0 60 --
                       ${gpt} train --init-from-hf ${hf_data}/hf_gpt2 --steps 2 --batch-size 2 --eval-every 0
                       --eval-tokens 256 --sample-tokens 0 --threads 2 --out ${ft})
      set_tests_properties(cli_gpt_hf_ft_clean PROPERTIES FIXTURES_SETUP gpt_hf_ft_clean)
      set_tests_properties(cli_gpt_hf_ft_train PROPERTIES FIXTURES_SETUP gpt_hf_ft FIXTURES_REQUIRED gpt_hf_ft_clean)
      # item 4: a --resume refused as another model had already replaced the run's tokenizer with the other
      # folder's (the command exits 2 only when gpt failed and both tokenizer files are still the run's own)
      saccade_cli_test(gpt_hf_resume_other_model
                       --err "^gpt: --resume: 'ft1/last.safetensors' holds a different model \\(gpt: .*vocab 991 \\(hf\\).*\\) than this one \\(llama: .*. nothing was changed$"
                       --keep 2 60 -- sh -c "cp -r ${ft} ft1 && ! ${gpt} train --resume --init-from-hf ${hf_data}/hf_llama --steps 4 --batch-size 2 --eval-every 0 --eval-tokens 256 --sample-tokens 0 --threads 2 --out ft1 && cmp -s ft1/tokenizer.json ${hf_data}/hf_gpt2/tokenizer.json && cmp -s ft1/tokenizer_config.json ${hf_data}/hf_gpt2/tokenizer_config.json && exit 2")
      # item 5: `gpt sample --checkpoint` looked for the tokenizer in the current folder, and used any found there
      saccade_cli_test(gpt_hf_sample_tokenizer_beside --out "^gpt: .*vocab 991 \\(hf\\).*, from ${ft}/best.safetensors$" --out "^---$" 0 60 --
                       ${gpt} sample --checkpoint ${ft}/best.safetensors --prompt x --max-new-tokens 4 --threads 2)
      saccade_cli_test(gpt_hf_sample_other_tokenizer
                       --err "^gpt: --tokenizer: the tokenizer in 'other' has 993 ids, the model in 'other/best.safetensors' embeds 991: not its tokenizer$"
                       --keep 2 60 -- sh -c "mkdir other && cp ${ft}/best.safetensors ${hf_data}/hf_llama/tokenizer.json ${hf_data}/hf_llama/tokenizer_config.json other/ && ${gpt} sample --checkpoint other/best.safetensors --prompt x")
      # item 15: an export of a fine-tuned model to another folder left its tokenizer behind
      saccade_cli_test(gpt_hf_export_elsewhere --out "^wrote the tokenizer the weights need into moved" --out "^---$" --keep 0 60 --
                       sh -c "mkdir moved && ${gpt} export --checkpoint ${ft}/best.safetensors --to moved/m.safetensors && ${gpt} sample --checkpoint moved/m.safetensors --prompt x --max-new-tokens 4 --threads 2")
      set_tests_properties(cli_gpt_hf_resume_other_model cli_gpt_hf_sample_tokenizer_beside cli_gpt_hf_sample_other_tokenizer
                           cli_gpt_hf_export_elsewhere PROPERTIES FIXTURES_REQUIRED gpt_hf_ft)
      saccade_cli_test(gpt_hf_save_bytes --keep --out "^wrote hf: the best model" --out "^ids:( [0-9]+){5}$" 0 60 --
                       sh -c "${gpt} train --steps 3 --batch-size 2 --context 16 --n-layer 1 --n-head 2 --d-model 16 --eval-every 0 --eval-tokens 256 --sample-tokens 0 --threads 2 --out run --save-hf hf && ${gpt} sample --hf hf --prompt abc --max-new-tokens 5 --print-ids --threads 2")
    endif()
    if(EXISTS "/usr/share/games/fortunes/fortunes")
      # a Llama folder fine-tunes into a GPT of arch llama, and goes back to the Llama layout
      saccade_cli_test(gpt_hf_finetune_llama --keep --out "^initialised from .*hf_llama \\(llama: 2 layers"
                       --out "^llama: 2 layers, 4 heads \\(2 key/value\\), d_model 32" --out "^tokens [0-9]+$" 0 60 --
                       sh -c "${gpt} train --init-from-hf ${hf_data}/hf_llama --steps 3 --batch-size 2 --eval-every 0 --eval-tokens 256 --sample-tokens 8 --threads 2 --out run --save-hf hf && grep -q '\"bos_token_id\": 991' hf/config.json && grep -q '\"eos_token_id\": 992' hf/config.json && ${gpt} export --checkpoint run/best.safetensors --hf hf2 && grep -q '\"bos_token_id\": 991' hf2/config.json && ${gpt} eval --hf hf --data ${hf_data}/hf_eval.txt --threads 2")
    endif()
    if(EXISTS "/usr/share/games/fortunes/fortunes")
      # --context with --init-from-hf crops the model's (32) to the windows (16), and the export says so
      saccade_cli_test(gpt_hf_finetune_cropped --keep --out "^gpt: 2 layers, 4 heads, d_model 32, context 16"
                       --out "^tokens [0-9]+$" 0 60 --
                       sh -c "${gpt} train --init-from-hf ${hf_data}/hf_gpt2 --context 16 --steps 2 --batch-size 2 --eval-every 0 --eval-tokens 64 --sample-tokens 0 --threads 2 --out run --save-hf hf && grep -q '\"n_positions\": 16' hf/config.json && ${gpt} eval --hf hf --data ${hf_data}/hf_eval.txt --threads 2")
    endif()
    saccade_cli_refusal(gpt_hf_init_context_too_long "^gpt: --context: 64 passes the context of '.*hf_gpt2' \\(32\\)$"
                        ${gpt} train --init-from-hf ${hf_data}/hf_gpt2 --context 64)
    saccade_cli_refusal(gpt_hf_init_with_sizes "^gpt: --n-layer excludes --init-from-hf$" ${gpt} train --init-from-hf ${hf_data}/hf_gpt2 --n-layer 2)
    # issue 49 item 18: --arch llama beside a GPT-2 folder trained a GPT-2 without a word
    saccade_cli_refusal(gpt_hf_init_with_arch "^gpt: --arch excludes --init-from-hf$" ${gpt} train --init-from-hf ${hf_data}/hf_gpt2 --arch llama)
    # issue 49 item 3: --save-hf onto the --init-from-hf folder overwrote the pretrained model
    saccade_cli_test(gpt_hf_save_onto_source --err "^gpt: --save-hf: './m/' is the folder --init-from-hf reads: write the fine-tuned model to another folder$"
                     --keep 2 5 -- sh -c "cp -r ${hf_data}/hf_gpt2 m && ${gpt} train --init-from-hf m --save-hf ./m/ --steps 1 --batch-size 2 --eval-every 0 --eval-tokens 64 --sample-tokens 0 --threads 2")
    # a run's --out on the --init-from-hf folder put its checkpoints among the model's files
    saccade_cli_test(gpt_hf_out_onto_source --err "^gpt: --out: 'm' is the folder --init-from-hf reads: write the run to another folder$"
                     --keep 2 5 -- sh -c "cp -r ${hf_data}/hf_gpt2 m && ls -A m > before && ${gpt} train --init-from-hf m --out m --steps 1 --batch-size 2 --eval-every 0 --eval-tokens 64 --sample-tokens 0 --threads 2; rc=$?; ls -A m | cmp -s - before && exit $rc")
    saccade_cli_refusal(gpt_hf_save_bpe "^gpt: --save-hf: a bpe \\(SentencePiece\\) model has no tokenizer in the Hugging Face layout"
                        ${gpt} train --tokenizer bpe --save-hf hf)
  endif()
endif()

if(TARGET image_caption)
  set(ic $<TARGET_FILE:image_caption>)
  # item 1: bad numbers became the defaults
  saccade_cli_refusal(caption_steps_zero "^image_caption: --steps: 0 is not allowed \\(need an integer >= 1\\)$" ${ic} --steps 0)
  saccade_cli_refusal(caption_steps_negative "^image_caption: --steps: -5 is not allowed" ${ic} --steps -5)
  saccade_cli_refusal(caption_lr_zero "^image_caption: --lr: 0 is not allowed \\(need a number > 0\\)$" ${ic} --lr 0)
  # item 5
  saccade_cli_refusal(caption_batch_size_zero "^image_caption: --batch-size: 0 is not allowed \\(need an integer >= 1\\)$" ${ic} --batch-size 0)
  # item 10: --help shows every default
  saccade_cli_test(caption_help_defaults --out "--model .*\\(default: sat\\)" --out "--batch-size .*\\(default: 64\\)"
                   --out "--out .*\\(default: caption_out\\)" --out "--eval-scenes .*\\(default: 2000\\)"
                   --out "--steps .*\\(default: 1000\\)" 0 1 -- ${ic} --help)
  # item 14: a failed run left an empty output folder
  saccade_cli_refusal(caption_missing_data "^image_caption: --data: '/nonexistent/fashion-mnist' does not exist [(]Fashion-MNIST: install Debian's dataset-fashion-mnist" ${ic} --data /nonexistent/fashion-mnist)
  # the data folder holds no Fashion-MNIST: the error comes after the header lines, and leaves no folder behind
  # item 11: with `> log 2>&1` the header lines come before the error
  saccade_cli_test(caption_data_without_files --first "^device cpu" --err "^image_caption: read_idx: cannot open .*/t10k" 1 10 -- ${ic} --data ${CMAKE_CURRENT_LIST_DIR})
  saccade_cli_test(caption_eval_only_bad_checkpoint --err "^image_caption: .*run_cli.sh" 1 10 -- ${ic} --eval-only --checkpoint ${SACCADE_CLI_RUN})
  saccade_cli_refusal(caption_eval_only_missing "^image_caption: --checkpoint: 'caption_out/checkpoint.safetensors' does not exist$" ${ic} --eval-only)
  # the tests that train: only where Fashion-MNIST is installed (scripts/setup)
  if(EXISTS "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
    # item 8: a resume with another --model trained the checkpoint's model in silence
    set(run ${SACCADE_CLI_WORK}/caption_tiny)
    add_test(NAME cli_caption_tiny_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${run})
    # item 12: the progress line's loss and the final one are named, the checkpoint's path is said (in the
    # regex, "." stands for ";", a CMake list separator)
    saccade_cli_test(caption_tiny_train --out "^--resume: no checkpoint at ${run}/checkpoint.safetensors: starting a fresh sat model$"
                     --out "^step 2/2 .* avg loss [0-9.]+ " --out "^training 2 steps of batch 2, .*checkpoint ${run}/checkpoint.safetensors$"
                     --out "^trained 2 steps in .*final training loss [0-9.]+ \\(the mean of the last 2 steps. the progress line's loss is a running average\\)$"
                     --keep 0 120 -- ${ic} --steps 2 --batch-size 2 --eval-scenes 2 --pictures 0 --conv1 4 --conv2 4
                     --d-model 16 --hidden 16 --threads 2 --out ${run} --resume)
    set_tests_properties(cli_caption_tiny_clean PROPERTIES FIXTURES_SETUP caption_tiny_clean)
    set_tests_properties(cli_caption_tiny_train PROPERTIES FIXTURES_SETUP caption_tiny FIXTURES_REQUIRED caption_tiny_clean)
    saccade_cli_test(caption_resume_other_model --err "^image_caption: --resume: '.*' holds another model .* than --model ask for$" 2 10 --
                     ${ic} --model transformer --out ${run} --resume)
    set_tests_properties(cli_caption_resume_other_model PROPERTIES FIXTURES_REQUIRED caption_tiny)
  endif()
endif()

if(TARGET g2p)
  set(g2p $<TARGET_FILE:g2p>)
  # item 1: lr and dropout fell back to the defaults
  saccade_cli_refusal(g2p_lr_negative "^g2p: --lr: -1 is not allowed \\(need a number > 0\\)$" ${g2p} --lr -1)
  saccade_cli_refusal(g2p_dropout_negative "^g2p: --dropout: -0.5 is not allowed \\(need a number >= 0 and < 1\\)$" ${g2p} --dropout -0.5)
  # item 2: a raw C++ error ("cannot create std::vector larger than max_size()")
  saccade_cli_refusal(g2p_val_words_negative "^g2p: --val-words: -1 is not allowed \\(need an integer >= 1\\)$" ${g2p} --val-words -1)
  # item 10
  saccade_cli_test(g2p_help_defaults --out "--steps .*\\(default: 2500\\)" --out "--beam .*\\(default: 5\\)"
                   --out "--val-every .*\\(default: 500\\)" --out "--dict .*\\(default: /usr/share" 0 1 -- ${g2p} --help)
  # item 14: an empty --dict gave "G2PVocab: no phones in ''"; item 11: after the header lines in `> log 2>&1`
  saccade_cli_test(g2p_empty_dict --first "^device cpu" --err "^g2p: --dict: '/dev/null' holds no pronunciations" 2 10 -- ${g2p} --dict /dev/null)
  saccade_cli_test(g2p_eval_only_bad_checkpoint --err "^g2p: .*run_cli.sh" 1 10 -- ${g2p} --eval-only --checkpoint ${SACCADE_CLI_RUN})
  saccade_cli_refusal(g2p_eval_only_without_checkpoint "^g2p: --eval-only: needs --checkpoint FILE$" ${g2p} --eval-only)
  # issue 49 item 17: flags that cannot apply are refused, not ignored (--words alone ran a full training)
  saccade_cli_refusal(g2p_words_without_checkpoint "^g2p: --words: needs --checkpoint FILE \\(the trained model that pronounces them\\)$"
                      ${g2p} --words hi)
  saccade_cli_refusal(g2p_checkpoint_steps "^g2p: --steps: does not apply with --checkpoint \\(pronouncing with a trained model\\)$"
                      ${g2p} --checkpoint ${SACCADE_CLI_RUN} --words hi --steps 5)
  saccade_cli_refusal(g2p_checkpoint_model "^g2p: --model: does not apply with --checkpoint \\(pronouncing with a trained model\\): the checkpoint holds its model's settings$"
                      ${g2p} --checkpoint ${SACCADE_CLI_RUN} --words hi --model transformer)
  saccade_cli_refusal(g2p_eval_only_lr "^g2p: --lr: does not apply with --eval-only \\(evaluating a trained model\\)$"
                      ${g2p} --eval-only --checkpoint ${SACCADE_CLI_RUN} --lr 0.1)
  # the tests that train: only where the CMU dictionary is installed (festlex-cmu, scripts/setup)
  if(EXISTS "/usr/share/festival/dicts/cmu/cmudict-0.4.out")
    # item 8: a resume states what it resumed, refuses another model, and says when there is nothing to train
    set(run ${SACCADE_CLI_WORK}/g2p_tiny)
    set(tiny --train-words 200 --test-words 5 --val-words 5 --val-every 1 --hidden 8 --beam 1 --threads 2)
    add_test(NAME cli_g2p_tiny_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${run})
    saccade_cli_test(g2p_tiny_train --out "^--resume: no checkpoint at ${run}/checkpoint.safetensors: starting a fresh bahdanau model$"
                     --out "^trained 2 steps in .*training loss .* \\(the mean of the first 1 step\\) -> .* \\(of the last 1 step;"
                     --out "^checkpoints in ${run}: checkpoint.safetensors"
                     --keep 0 120 -- ${g2p} ${tiny} --steps 2 --out ${run} --resume)
    set_tests_properties(cli_g2p_tiny_clean PROPERTIES FIXTURES_SETUP g2p_tiny_clean)
    set_tests_properties(cli_g2p_tiny_train PROPERTIES FIXTURES_SETUP g2p_tiny FIXTURES_REQUIRED g2p_tiny_clean)
    saccade_cli_test(g2p_resume_other_model --err "^g2p: --resume: '.*' holds another model .* than --model ask for$" 2 10 --
                     ${g2p} ${tiny} --model transformer --out ${run} --resume)
    saccade_cli_test(g2p_resume_nothing_to_train --out "^resumed from ${run}/checkpoint.safetensors at step 2$"
                     --out "nothing to train [(]--steps 1[)]$" --keep 0 120 -- ${g2p} ${tiny} --steps 1 --out ${run} --resume)
    set_tests_properties(cli_g2p_resume_other_model cli_g2p_resume_nothing_to_train PROPERTIES FIXTURES_REQUIRED g2p_tiny)
  endif()
endif()

if(TARGET nw_regression)
  set(nw $<TARGET_FILE:nw_regression>)
  saccade_cli_refusal(nw_epochs_zero "^nw_regression: --epochs: 0 is not allowed \\(need an integer from 1 to 1000000\\)$" ${nw} --epochs 0)
  saccade_cli_refusal(nw_lr_abc "^nw_regression: --lr: 'abc' is not a number$" ${nw} --lr abc)
  # issue 49 item 21: the README says every example takes --threads N
  saccade_cli_refusal(nw_threads_negative "^nw_regression: --threads: -1 is not allowed \\(need an integer from 0 to 4096\\)$" ${nw} --threads -1)
  saccade_cli_test(nw_threads_one --out "^parametric NW, 1 epochs of" --keep 0 60 -- ${nw} --threads 1 --epochs 1 --out nw)
  # item 14: --epochs 5 printed the d2l run twice
  saccade_cli_test(nw_epochs_five --count "^parametric NW, 5 epochs of" 1 --count "^parametric NW, 5 epochs, w" 1
                   --keep 0 60 -- ${nw} --epochs 5 --out nw)
endif()

# item 13: every command that a README shows parses with the program as built (flags that exist, values in
# their ranges), and runs with tiny settings (the commands of each README in order, in a temporary folder of
# their own), so that the READMEs cannot drift from the programs. The commands that cannot run here (mpirun,
# data not installed) are listed as skipped, with the reason, in the test's output.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND AND TARGET gpt AND TARGET image_caption AND TARGET g2p AND TARGET nw_regression)
  file(GLOB SACCADE_EXAMPLE_READMES ${PROJECT_SOURCE_DIR}/examples/README.md ${PROJECT_SOURCE_DIR}/examples/*/README.md)
  foreach(mode parse run)
    add_test(NAME cli_readme_commands_${mode}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/readme_commands.py --${mode} ${PROJECT_BINARY_DIR}
                     ${PROJECT_SOURCE_DIR}/README.md ${SACCADE_EXAMPLE_READMES})
  endforeach()
  set_tests_properties(cli_readme_commands_parse cli_readme_commands_run PROPERTIES LABELS cli TIMEOUT 300)
endif()
