#!/usr/bin/env python3
"""LoRA fine-tuning steps, saccade against PEFT + transformers (issue 52's speed and memory goals).

Both sides train a Llama of SmolLM-135M's shapes (random weights; --layers of its 30 blocks) with LoRA r 16,
lora_alpha 32 on every Linear but the output layer (PEFT's "all-linear"), AdamW (lr 1e-4) on the adapters
only, on batches of 4 rows of 512 random ids, the mean cross-entropy of every next token; one sample is a whole
step (forward, loss, backward, AdamW). saccade: bench/finetune_peft (the base frozen in bfloat16, the adapters
float32, as `gpt finetune --dtype bf16`), each row packed with documents of 16..320 ids attending to
themselves only, or plain causal rows. PEFT + transformers (PyPI; never a dependency of saccade):
LlamaForCausalLM (sdpa attention) + peft.get_peft_model, each at the setting given:
  autocast   float32 weights under torch.autocast("cpu", torch.bfloat16) (the issue's reference)
  bf16       the model converted to bfloat16, PEFT's adapters float32 (autocast_adapter_dtype)
with plain causal rows (transformers' packing needs flash-attention; on the CPU its rows attend across
documents, which costs it no more). "checkpoint" adds activation checkpointing on both sides
(gradient_checkpointing_enable, non-reentrant). Each configuration alternates one saccade process and one
PyTorch process --runs times; a process's figure is its median step after the first two, and its peak RSS
(VmHWM / ru_maxrss: the library, the model, the steps).

  SACCADE_PYTHON=/work/.venv-bench/bin/python
  $SACCADE_PYTHON bench/finetune_peft.py --bench build/release/bench/finetune_peft --layers 30 --steps 6 --runs 2
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def torch_worker(layers, steps, threads, setting, checkpoint):
    import resource

    import peft
    import torch
    import transformers
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    config = transformers.LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                                      num_hidden_layers=layers, num_attention_heads=9, num_key_value_heads=3,
                                      max_position_embeddings=2048, rms_norm_eps=1e-5, tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(config)
    model.config._attn_implementation = "sdpa"
    if setting == "bf16":
        model = model.to(torch.bfloat16)
    if checkpoint:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = peft.get_peft_model(model, peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                                       target_modules="all-linear", task_type="CAUSAL_LM"))
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, weight_decay=0.0)
    g = torch.Generator().manual_seed(3)
    times = []
    loss = None
    for _ in range(steps):
        x = torch.randint(0, 49152, (4, 512), generator=g)
        t0 = time.perf_counter()
        with torch.autocast("cpu", torch.bfloat16, enabled=setting == "autocast"):
            loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(1e3 * (time.perf_counter() - t0))
    print(f"framework torch-{setting}\n{step_lines(times, 2048)}"
          f"peak_rss_mib {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}\n"
          f"start_rss_mib {start_rss:.1f}\nlast_loss {loss.item():.4f}\n"
          f"versions torch {torch.__version__} transformers {transformers.__version__} peft {peft.__version__}")


def step_lines(times, tokens):
    """The "key value" lines of a worker's step times in ms (the first two dropped): median, min, max, tokens/s."""
    ms = times[2:]
    return (f"step_ms {statistics.median(ms):.1f}\nstep_ms_min {min(ms):.1f}\nstep_ms_max {max(ms):.1f}\n"
            f"tokens_per_s {tokens * 1e3 / statistics.median(ms):.1f}\n")


def parse(text):
    """A worker's "key value" lines as a dict."""
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        out[k] = v
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/release/bench/finetune_peft")
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--settings", default="autocast,bf16")
    ap.add_argument("--checkpoint", action="store_true")
    ap.add_argument("--worker", default="")
    a = ap.parse_args()
    if a.worker:
        torch_worker(a.layers, a.steps, a.threads, a.worker, a.checkpoint)
        return
    ck = ["checkpoint"] if a.checkpoint else []
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    results = {}
    for run in range(a.runs):
        jobs = [("saccade packed", [a.bench, str(a.layers), str(a.steps), str(a.threads), "packed"] + ck),
                ("saccade plain", [a.bench, str(a.layers), str(a.steps), str(a.threads), "plain"] + ck)]
        for s in a.settings.split(","):
            jobs.append((f"torch {s}", [sys.executable, __file__, "--worker", s, "--layers", str(a.layers),
                                        "--steps", str(a.steps), "--threads", str(a.threads)] +
                         (["--checkpoint"] if a.checkpoint else [])))
        if run % 2:
            jobs.reverse()
        for name, cmd in jobs:
            r = parse(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout)
            results.setdefault(name, []).append(r)
            print(f"run {run} {name}: {r['step_ms']} ms a step, {r['tokens_per_s']} tokens/s, peak RSS "
                  f"{r['peak_rss_mib']} MiB", flush=True)
    info = results["saccade packed"][0]
    print(f"\nOpenBLAS core {info['core']}, CPU {info['cpu']}, {a.threads} threads, {a.layers} layers, "
          f"checkpoint {a.checkpoint}, load {os.getloadavg()[0]:.2f}; {results[next(k for k in results if k.startswith('torch'))][0]['versions']}")
    ref = statistics.median(float(r["step_ms"]) for r in results["saccade packed"])
    print(f"{'form':16s} {'ms a step, median (min-max of runs)':36s} {'tokens/s':>9s} {'peak RSS MiB':>13s} "
          f"{'time / saccade packed':>22s}")
    for name, rs in results.items():
        ms = [float(r["step_ms"]) for r in rs]
        rss = max(float(r["peak_rss_mib"]) for r in rs)
        print(f"{name:16s} {statistics.median(ms):10.1f} ({min(ms):.1f}-{max(ms):.1f}){'':14s} "
              f"{2048e3 / statistics.median(ms):9.1f} {rss:13.1f} {statistics.median(ms) / ref:22.2f}")
    print(f"saccade's base in bf16: {info['base_bf16_mib']} MiB")


if __name__ == "__main__":
    main()
