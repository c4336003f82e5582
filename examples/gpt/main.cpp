// gpt: a decoder-only Transformer (GPT-2's architecture) trained on Debian's fortunes (DATA.md) and sampled
// with a KV cache. `gpt train` trains and scores (validation bits per byte); `gpt sample` generates from a
// checkpoint. examples/gpt/README.md gives the commands and the measured results.
#include <malloc.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "autograd/grad_mode.h"
#include "distributed/process_group.h"
#include "examples/common/plots.h"
#include "examples/gpt/data.h"
#include "examples/gpt/generate.h"
#include "examples/gpt/tokenizer.h"
#include "examples/gpt/training.h"
#include "ops/blas.h"
#include "ops/creation.h"
#include "ops/error.h"
#include "ops/threads.h"
#include "profiler/profiler.h"

namespace ex = saccade::examples;
namespace dist = saccade::distributed;

namespace {

// Samples `num_samples` continuations of every prompt in one batch (prompts of any lengths, one KV cache per
// block): printed as the tokens come when there is one row, else every row at the end. Returns the first
// prompt's first sample (prompt and new tokens).
std::vector<int64_t> run_samples(ex::GPT& model, const ex::Tokenizer& tok,
                                 const std::vector<std::string>& prompts, const ex::SamplingOptions& opts,
                                 int64_t num_samples) {
  std::vector<std::vector<int64_t>> batch;
  for (const std::string& prompt : prompts) {
    int64_t dropped = 0;
    std::vector<int64_t> ids = ex::fit_prompt(tok.encode(prompt), model.config().context, &dropped);
    if (dropped > 0)
      std::fprintf(stderr,
                   "gpt: the prompt has %zu tokens, more than the context of %lld: kept its last %lld\n",
                   ids.size() + dropped, static_cast<long long>(model.config().context),
                   static_cast<long long>(ids.size()));
    batch.insert(batch.end(), num_samples, ids);
  }
  // streaming: decode the whole sample and print what is new (a subword's bytes may complete later)
  std::vector<int64_t> shown = batch[0];
  std::string printed = tok.decode(shown);
  const bool streaming = batch.size() == 1;
  if (streaming) std::printf("---\n%s", printed.c_str());
  std::fflush(stdout);
  auto stream = [&](const std::vector<int64_t>& next) {
    if (next[0] < 0) return;
    shown.push_back(next[0]);
    std::string text = tok.decode(shown);
    if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0)
      std::fputs(text.c_str() + printed.size(), stdout);
    printed = text;
    std::fflush(stdout);
  };
  ex::Generation g = ex::generate(model, batch, opts, true, false,
                                  streaming ? std::function<void(const std::vector<int64_t>&)>(stream)
                                            : std::function<void(const std::vector<int64_t>&)>());
  if (streaming) std::printf("\n");
  for (size_t r = 0; !streaming && r < batch.size(); ++r) {
    if (num_samples == 1)
      std::printf("---\n");
    else
      std::printf("--- sample %lld\n", static_cast<long long>(r % num_samples));
    std::printf("%s%s\n", tok.decode(batch[r]).c_str(), tok.decode(g.tokens[r]).c_str());
  }
  std::vector<int64_t> first = batch[0];
  first.insert(first.end(), g.tokens[0].begin(), g.tokens[0].end());
  return first;
}

// The attention of every head of block `layer` over the last (at most 48) tokens of `ids`, as one PNG of
// H panels (queries down, keys across), each token labelled by its text.
void write_attention_picture(const std::string& path, ex::GPT& model, const ex::Tokenizer& tok,
                             const std::vector<int64_t>& ids, int64_t layer) {
  const int64_t n_layer = model.config().n_layer, H = model.config().n_head;
  if (layer < 0) layer += n_layer;
  SACCADE_CHECK(layer >= 0 && layer < n_layer, "gpt: --attention-layer {} outside the {} blocks", layer,
                n_layer);
  const int64_t T = std::min<int64_t>({48, model.config().context, static_cast<int64_t>(ids.size())});
  std::vector<int64_t> tail(ids.end() - T, ids.end());
  model.eval();
  model.set_need_weights(true);  // the composed path keeps the weights
  {
    saccade::NoGradGuard no_grad;
    saccade::Tensor x = saccade::ops::from_vector(tail, {1, T}).to(model.wte->weight.device());
    model.forward(x);
  }
  saccade::Tensor w = model.attention_weights()[layer].to(saccade::Device::cpu());  // (1, H, T, T)
  model.set_need_weights(std::nullopt);
  ex::Heatmap map;
  map.weights = H % 2 == 0 && H > 2 ? w.reshape({2, H / 2, T, T}) : w;
  map.title = fmt::format("block {}: attention of each of the {} heads", layer, H);
  for (int64_t id : tail) {
    std::string s = tok.decode({id});
    for (char& c : s)
      if (static_cast<unsigned char>(c) < 32 || static_cast<unsigned char>(c) > 126)
        c = c == '\n' ? '/' : '?';
    map.row_labels.push_back(s == " " ? "_" : s);
  }
  map.col_labels = map.row_labels;
  map.width = 1400, map.height = 1400;
  ex::write_heatmap(path, map);
  std::printf("wrote %s\n", path.c_str());
}

// The training loss and the validation of the whole run (log.csv) against steps, both in bits per byte: the
// training loss (nats per token) over ln 2 and the training stream's bytes per token.
void write_loss_plot(const std::string& path, const std::vector<ex::TrainLogRow>& log,
                     double train_bytes_per_token) {
  if (!ex::plots_available() || log.empty()) return;
  ex::LinePlot plot;
  plot.title = "GPT on fortunes", plot.x_label = "step", plot.y_label = "bits per byte";
  plot.legend_right = true;
  ex::Series train{{}, {}, "training loss (bits/byte)"};
  ex::Series valid{{}, {}, "validation (bits/byte)", ex::Series::Style::Dashed};
  for (const ex::TrainLogRow& row : log) {
    train.x.push_back(static_cast<double>(row.step));
    train.y.push_back(row.train_loss / std::log(2.0) / train_bytes_per_token);
    if (!std::isnan(row.val_bits_per_byte)) {
      valid.x.push_back(static_cast<double>(row.step));
      valid.y.push_back(row.val_bits_per_byte);
    }
  }
  plot.series = {train, valid};
  ex::write_line_plot(path, plot);
}

// The validation curves (bits per byte against training seconds) of several runs' logs in one PNG: saccade's
// and bench/gpt_twin.py's at equal time.
void write_curves(const std::string& path, const std::vector<std::string>& logs,
                  std::vector<std::string> labels, const std::string& title) {
  SACCADE_CHECK(labels.empty() || labels.size() == logs.size(),
                "gpt curves: {} --label for {} logs (give one per log, or none)", labels.size(), logs.size());
  ex::LinePlot plot;
  plot.title = title, plot.x_label = "training time (s)", plot.y_label = "validation bits per byte";
  plot.width = 900, plot.legend_right = true;
  for (size_t i = 0; i < logs.size(); ++i) {
    ex::Series s{{}, {}, labels.empty() ? logs[i] : labels[i]};
    s.style = i % 2 ? ex::Series::Style::Dashed : ex::Series::Style::Line;
    for (const ex::TrainLogRow& row : ex::read_train_log(logs[i]))
      if (!std::isnan(row.val_bits_per_byte))
        s.x.push_back(row.seconds), s.y.push_back(row.val_bits_per_byte);
    SACCADE_CHECK(!s.x.empty(), "gpt curves: {} holds no validation score", logs[i]);
    plot.series.push_back(s);
  }
  ex::write_line_plot(path, plot);
  std::printf("wrote %s\n", path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  saccade::use_best_blas_core(argv);   // OpenBLAS at the CPU's width (ops/blas.h); may re-execute once
  mallopt(M_MMAP_THRESHOLD, 1 << 30);  // keep big freed blocks in the heap (see image_caption/main.cpp)
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"A GPT (GPT-2's architecture) trained on Debian's fortunes and sampled with a KV cache"};
  app.require_subcommand(1);
  std::string device_name = "cpu", out_dir = "gpt_out", data_dir = ex::kFortunesDir, checkpoint,
              tokenizer = "byte";
  int threads = 0;
  ex::GPTConfig config;
  ex::GPTTrainOptions topts;
  ex::SamplingOptions sopts;
  uint64_t model_seed = 0;
  int64_t sample_tokens = 300, num_samples = 1, vocab_size = 2048, attention_layer = -1;
  std::string attention_png, dtype_name = "f32", export_to;
  bool distributed = false;
  bool checkpoint_activations = false;
  std::vector<std::string> prompts;
  auto common = [&](CLI::App* sub) {
    sub->option_defaults()->always_capture_default();  // --help shows the defaults
    sub->add_option("--device", device_name, "cpu, or cuda / cuda:N when built with CUDA");
    sub->add_option("--threads", threads, "CPU threads (default: OMP_NUM_THREADS, else all cores)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--out", out_dir, "directory of the checkpoints (last.safetensors, best.safetensors)");
    sub->add_option("--temperature", sopts.temperature, "sampling temperature (0: greedy)");
    sub->add_option("--top-k", sopts.top_k, "sample among the k most likely tokens (0: all)");
    sub->add_option("--top-p", sopts.top_p,
                    "nucleus sampling: the most likely tokens holding this probability");
  };
  CLI::App* train = app.add_subcommand("train", "train on the fortunes and report validation bits per byte");
  common(train);
  train->add_option("--data", data_dir, "folder of the fortune files");
  train->add_option("--tokenizer", tokenizer, "byte, or bpe (SentencePiece, trained on the training stream)")
      ->check(CLI::IsMember({"byte", "bpe"}));
  train->add_option("--vocab-size", vocab_size, "pieces of the bpe tokenizer (1000-4000)")
      ->check(CLI::Range(260, 65536));
  train->add_option("--steps", topts.steps, "optimizer steps (with --time-limit: the most)")
      ->check(CLI::PositiveNumber);
  train
      ->add_option("--time-limit", topts.time_limit,
                   "seconds of training (scoring excluded); the cosine decay then runs over time (0: none)")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--batch-size", topts.batch_size, "windows per step (over ranks and accumulation)")
      ->check(CLI::PositiveNumber);
  train->add_option("--grad-accum", topts.grad_accum, "micro-batches per step")->check(CLI::PositiveNumber);
  train->add_option("--lr", topts.lr, "AdamW's peak learning rate");
  train->add_option("--min-lr", topts.min_lr, "learning rate at the end of the cosine decay");
  train->add_option("--warmup", topts.warmup, "linear warmup steps");
  train->add_option("--weight-decay", topts.weight_decay, "AdamW weight decay of the block matrices");
  train->add_option("--clip", topts.clip, "max gradient norm");
  train->add_option("--eval-every", topts.eval_every, "steps between validation scores and checkpoints");
  train->add_option("--eval-tokens", topts.eval_tokens, "validation tokens scored during training (-1: all)");
  train->add_option("--context", config.context, "context length (block size)")->check(CLI::PositiveNumber);
  train->add_option("--n-layer", config.n_layer, "blocks")->check(CLI::PositiveNumber);
  train->add_option("--n-head", config.n_head, "attention heads")->check(CLI::PositiveNumber);
  train->add_option("--d-model", config.d_model, "width of the residual stream")->check(CLI::PositiveNumber);
  // a 10-minute run sees the training stream under 3 times and underfits: no dropout by default (GPT-2: 0.1)
  config.dropout = 0.0;
  train->add_option("--dropout", config.dropout, "dropout probability (GPT-2's is 0.1)");
  train->add_option("--seed", model_seed, "seed of the init, the dropout and the training windows");
  train->add_flag("--resume", topts.resume, "continue from OUT/last.safetensors when it exists");
  train->add_option("--profile", topts.profile_trace,
                    "profile steps 2-4: a Chrome trace (Perfetto, chrome://tracing) here, a PNG beside it");
  train->add_option("--stop-at", topts.stop_at, "stop after this step (saved: --resume continues the run)");
  train->add_option("--sample-tokens", sample_tokens, "tokens to sample from the best model at the end");
  train
      ->add_option(
          "--dtype", dtype_name,
          "precision of the forward: f32, bf16 (autocast) or f16 (autocast and loss scaling); weights, "
          "gradients and AdamW stay float32")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  train->add_flag("--distributed", distributed,
                  "data-parallel over the ranks of mpirun (--batch-size is global; rank 0 prints and saves)");
  train->add_flag("--checkpoint-activations", checkpoint_activations,
                  "recompute each block during backward instead of keeping its activations (less memory, one "
                  "more forward per block)");
  CLI::App* sample = app.add_subcommand("sample", "generate text from a checkpoint (stdin when no --prompt)");
  common(sample);
  sample->add_option("--checkpoint", checkpoint, "checkpoint (default OUT/best.safetensors)");
  sample->add_option("--prompt", prompts, "prompt text (repeat for several prompts)");
  sample->add_option("--max-new-tokens", sopts.max_new_tokens, "tokens to generate")
      ->check(CLI::NonNegativeNumber);
  sample->add_option("--seed", sopts.seed, "seed of the sampling");
  sample->add_option("--attention-png", attention_png,
                     "write the attention of each head over the sample here");
  sample->add_option("--attention-layer", attention_layer,
                     "the block drawn by --attention-png (-1: the last)");
  sample->add_option("--num-samples", num_samples, "samples per prompt (one batch, one KV cache per block)")
      ->check(CLI::PositiveNumber);
  CLI::App* exporter = app.add_subcommand(
      "export",
      "write a checkpoint's model weights alone, rounded to bfloat16 (half the bytes; for sampling "
      "and PyTorch, not for resuming)");
  exporter->add_option("--checkpoint", checkpoint, "checkpoint to read")->required();
  exporter->add_option("--to", export_to, "the bfloat16 file to write")->required();
  std::vector<std::string> curve_logs, curve_labels;
  std::string curves_png = "curves.png", curves_title = "GPT on fortunes: validation at equal training time";
  CLI::App* curves =
      app.add_subcommand("curves", "draw the validation curves of runs' log.csv files in one PNG");
  curves->add_option("logs", curve_logs, "log.csv files (gpt train's OUT/log.csv, bench/gpt_twin.py's)")
      ->required();
  curves->add_option("--label", curve_labels, "legend text of each log (in order)");
  curves->add_option("--png", curves_png, "the picture to write")->capture_default_str();
  curves->add_option("--title", curves_title, "the picture's title")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (*exporter) {
    try {
      ex::export_gpt(checkpoint, export_to, saccade::DType::BFloat16);
      std::printf("wrote %s (bfloat16 weights of %s)\n", export_to.c_str(), checkpoint.c_str());
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpt: %s\n", e.what());
      return 1;
    }
  }
  if (*curves) {
    try {
      write_curves(curves_png, curve_logs, curve_labels, curves_title);
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpt: %s\n", e.what());
      return 1;
    }
  }

  std::optional<dist::Environment> env;
  if (distributed) {
    env.emplace(&argc, &argv);
    if (!dist::is_main_process() && !std::freopen("/dev/null", "w", stdout)) return 1;
  }
  try {
    if (!topts.profile_trace.empty())
      saccade::profiler::check_trace_path(topts.profile_trace, "--profile");  // before any work
    saccade::Device device = saccade::Device::parse(device_name);
    SACCADE_CHECK(device.is_cpu() || saccade::cuda_is_available(),
                  "gpt: --device {} asked for, but saccade was built without CUDA or no GPU is present",
                  device_name);
    if (threads > 0) saccade::set_num_threads(threads);
    std::printf("device %s, %d CPU threads\n%s\n", device.str().c_str(), saccade::get_num_threads(),
                saccade::blas_info_line().c_str());
    if (*sample) {
      if (checkpoint.empty()) checkpoint = out_dir + "/best.safetensors";
      std::shared_ptr<ex::GPT> model = ex::load_gpt(checkpoint, device);
      std::unique_ptr<ex::Tokenizer> tok = ex::make_tokenizer(
          model->config().tokenizer, std::filesystem::path(checkpoint).parent_path().string());
      std::printf("%s, from %s\n", model->config().describe().c_str(), checkpoint.c_str());
      if (prompts.empty())
        prompts.emplace_back(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      std::vector<int64_t> passage = run_samples(*model, *tok, prompts, sopts, num_samples);
      if (!attention_png.empty())
        write_attention_picture(attention_png, *model, *tok, passage, attention_layer);
      return 0;
    }
    ex::FortunesCorpus corpus = ex::load_fortunes(data_dir);
    std::printf(
        "fortunes: %lld documents (%lld distinct): train %lld documents, %zu bytes; validation %lld "
        "documents, %zu bytes\n",
        static_cast<long long>(corpus.documents), static_cast<long long>(corpus.distinct),
        static_cast<long long>(corpus.train_documents), corpus.train.size(),
        static_cast<long long>(corpus.valid_documents), corpus.valid.size());
    std::filesystem::create_directories(out_dir);
    if (tokenizer == "bpe" && !(topts.resume && std::filesystem::exists(ex::tokenizer_path(out_dir)))) {
      if (dist::is_main_process()) {
        std::printf("training a SentencePiece BPE tokenizer of %lld pieces on the training stream -> %s\n",
                    static_cast<long long>(vocab_size), ex::tokenizer_path(out_dir).c_str());
        std::fflush(stdout);
        ex::SentencePieceTokenizer::train(corpus.train, vocab_size, ex::tokenizer_path(out_dir));
      }
      if (distributed) dist::barrier();
    }
    std::unique_ptr<ex::Tokenizer> tok = ex::make_tokenizer(tokenizer, out_dir);
    config.vocab_size = tok->vocab_size();
    config.tokenizer = tok->name();
    std::vector<int64_t> train_ids = tok->encode(corpus.train), valid_ids = tok->encode(corpus.valid);
    // DATA.md's bits per byte: a token stands for the stream's bytes over its tokens (exactly 1 for bytes)
    topts.bytes_per_token = static_cast<double>(corpus.valid.size()) / static_cast<double>(valid_ids.size());
    std::printf("tokens: %s, vocabulary %lld; train %zu tokens, validation %zu tokens (%.3f bytes/token)\n",
                tok->name().c_str(), static_cast<long long>(tok->vocab_size()), train_ids.size(),
                valid_ids.size(), topts.bytes_per_token);
    auto model = std::make_shared<ex::GPT>(config, model_seed);
    model->to(device);
    for (auto& block : model->h) block->checkpoint_activations = checkpoint_activations;
    std::printf("%s, %lld parameters\n", config.describe().c_str(),
                static_cast<long long>(model->num_parameters()));
    topts.seed = model_seed;
    topts.device = device;
    topts.out_dir = out_dir;
    topts.distributed = distributed;
    topts.dtype = dtype_name == "bf16"  ? saccade::DType::BFloat16
                  : dtype_name == "f16" ? saccade::DType::Float16
                                        : saccade::DType::Float32;
    std::printf("forward in %s%s\n", std::string(saccade::dtype_name(topts.dtype)).c_str(),
                topts.dtype == saccade::DType::Float32 ? "" : " (autocast; float32 weights and optimizer)");
    std::fflush(stdout);
    ex::GPTTrainResult r = ex::train_gpt(*model, train_ids, valid_ids, topts);
    if (!dist::is_main_process()) return 0;
    if (r.steps_done > 0) {
      std::printf(
          "trained %lld steps in %.1f s (%.1f s with scoring and saving; %.2f steps/s, %.0f tokens/s), final "
          "training loss %.4f nats/token\n",
          static_cast<long long>(r.steps_done), r.seconds, r.wall_seconds, r.steps_done / r.seconds,
          r.tokens_per_second, r.final_loss);
      write_loss_plot(out_dir + "/loss.png", r.log,
                      static_cast<double>(corpus.train.size()) / static_cast<double>(train_ids.size()));
    }
    std::shared_ptr<ex::GPT> best = ex::load_gpt(out_dir + "/best.safetensors", device);
    ex::LMScore s = ex::evaluate_lm(*best, valid_ids, topts.bytes_per_token);
    std::printf("best model on the whole validation stream: %.4f nats/token, %.4f bits/byte (%lld tokens)\n",
                s.nats_per_token, s.bits_per_byte, static_cast<long long>(s.tokens));
    if (sample_tokens > 0) {
      sopts.max_new_tokens = sample_tokens;
      if (sopts.temperature == 1.0 && sopts.top_k == 0) sopts.temperature = 0.8;
      run_samples(*best, *tok, {"\n%\n"}, sopts, 1);
    }
  } catch (const std::exception& e) {
    if (distributed && dist::world_size() > 1)
      dist::world().abort(fmt::format("gpt: rank {}: {}", dist::rank(), e.what()));
    std::fprintf(stderr, "gpt: %s\n", e.what());
    return 1;
  }
  return 0;
}
