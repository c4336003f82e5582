// gpt: a decoder-only Transformer (GPT-2's architecture) trained on Debian's fortunes (docs/data.md) and
// sampled with a KV cache. `gpt train` trains and scores (validation bits per byte); `gpt sample` generates
// from a checkpoint; `gpt sample --hf DIR` and `gpt eval --hf DIR` run a GPT-2 or Llama model folder in the
// Hugging Face layout. examples/gpt/README.md gives the commands and the measured results.
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "autograd/grad_mode.h"
#include "distributed/process_group.h"
#include "examples/common/cli.h"
#include "examples/common/plots.h"
#include "examples/gpt/data.h"
#include "examples/gpt/finetune.h"
#include "examples/gpt/generate.h"
#include "examples/gpt/run_control.h"
#ifdef SACCADE_HAVE_HF
#include "examples/gpt/hf_gpt2.h"
#include "hf/gguf_model.h"
#include "hf/llama.h"
#include "hf/peft.h"
#include "hf/tokenizer.h"
#include "nn/linear.h"
#include "nn/lora.h"
#endif
#include "core/error.h"
#include "examples/gpt/tokenizer.h"
#include "examples/gpt/training.h"
#include "nn/serialization.h"
#include "ops/blas.h"
#include "ops/creation.h"
#include "ops/threads.h"

namespace ex = saccade::examples;
namespace dist = saccade::distributed;
namespace cli = saccade::examples::cli;

namespace {

// `ids` cut to their last `context` tokens (ex::fit_prompt), with a warning on stderr when that dropped any.
std::vector<int64_t> fit_prompt_warning(const std::vector<int64_t>& ids, int64_t context) {
  int64_t dropped = 0;
  std::vector<int64_t> kept = ex::fit_prompt(ids, context, &dropped);
  if (dropped > 0)
    std::fprintf(stderr,
                 "gpt: the prompt has %zu tokens, more than the context of %lld: kept its last %lld\n",
                 kept.size() + dropped, static_cast<long long>(context), static_cast<long long>(kept.size()));
  return kept;
}

// generate()'s on_tokens callback that prints row 0's text as it comes: the whole sample is decoded at every
// token and only what is new printed (a subword's bytes may complete later). `shown` starts as the ids
// already printed, whose text is `printed`.
struct TextStream {
  std::function<std::string(const std::vector<int64_t>&)> decode;
  std::vector<int64_t> shown;
  std::string printed;
  void operator()(const std::vector<int64_t>& next) {
    if (next[0] < 0) return;
    shown.push_back(next[0]);
    std::string text = decode(shown);
    if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0)
      std::fputs(text.c_str() + printed.size(), stdout);
    printed = text;
    std::fflush(stdout);
  }
};

// Samples `num_samples` continuations of every prompt in one batch (prompts of any lengths, one KV cache per
// block): printed as the tokens come when there is one row, else every row at the end. Returns the first
// prompt's first sample (prompt and new tokens).
std::vector<int64_t> run_samples(ex::GPT& model, const ex::Tokenizer& tok,
                                 const std::vector<std::string>& prompts, const ex::SamplingOptions& opts,
                                 int64_t num_samples) {
  std::vector<std::vector<int64_t>> batch;
  for (const std::string& prompt : prompts)
    batch.insert(batch.end(), num_samples, fit_prompt_warning(tok.encode(prompt), model.config().context));
  TextStream stream{[&](const std::vector<int64_t>& ids) { return tok.decode(ids); }, batch[0],
                    tok.decode(batch[0])};
  const bool streaming = batch.size() == 1;
  if (streaming) std::printf("---\n%s", stream.printed.c_str());
  std::fflush(stdout);
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
  for (int64_t id : tail) map.row_labels.push_back(ex::token_label(tok.decode({id})));
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
  plot.series = {train};
  if (!valid.x.empty()) plot.series.push_back(valid);
  ex::write_line_plot(path, plot);
}

// The validation curves (bits per byte against training seconds) of several runs' logs in one PNG: saccade's
// and bench/gpt_twin.py's at equal time.
void write_curves(const std::string& path, const std::vector<std::string>& logs,
                  std::vector<std::string> labels, const std::string& title) {
  if (!labels.empty() && labels.size() != logs.size())
    throw cli::UsageError("--label", fmt::format("{} label{} for {} logs (give one per log, or none)",
                                                 labels.size(), labels.size() == 1 ? "" : "s", logs.size()));
  ex::LinePlot plot;
  plot.title = title, plot.x_label = "training time (s)", plot.y_label = "validation bits per byte";
  plot.width = 900, plot.legend_right = true;
  for (size_t i = 0; i < logs.size(); ++i) {
    ex::Series s{{}, {}, labels.empty() ? logs[i] : labels[i]};
    s.style = i % 2 ? ex::Series::Style::Dashed : ex::Series::Style::Line;
    for (const ex::TrainLogRow& row : ex::read_train_log(logs[i]))
      if (!std::isnan(row.val_bits_per_byte))
        s.x.push_back(row.seconds), s.y.push_back(row.val_bits_per_byte);
    // an empty series would draw an empty picture (issue 42); a lone score is drawn as a dot
    if (s.x.empty())
      throw cli::UsageError("logs", fmt::format("'{}' holds no validation score: nothing to draw", logs[i]));
    plot.series.push_back(s);
  }
  ex::write_line_plot(path, plot);
  std::printf("wrote %s\n", path.c_str());
}

// The whole of a (small) file, "" when it cannot be read.
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The folder of the file `path` ("." for a bare file name).
std::string folder_of(const std::string& path) {
  const std::string folder = std::filesystem::path(path).parent_path().string();
  return folder.empty() ? "." : folder;
}

// The tokenizer.model in the folder of the file `path` ("./tokenizer.model" for a bare file name).
std::string tokenizer_beside(const std::string& path) { return ex::tokenizer_path(folder_of(path)); }

// gpt export: the bfloat16 weights of `checkpoint` at `to` and the tokenizer the model needs beside them (a
// bpe model's tokenizer.model, a fine-tuned Hugging Face model's tokenizer files), so that the exported
// folder samples on its own. Refuses, before writing anything, a `to` that is the checkpoint itself or a
// folder holding another tokenizer (cli::UsageError).
void export_with_tokenizer(const std::string& checkpoint, const std::string& to) {
  cli::require_file("--checkpoint", checkpoint);
  cli::require_different_files("--to", checkpoint, to);
  cli::require_writable_file("--to", to);
  namespace fs = std::filesystem;
  std::string kind;  // the model's tokenizer; export_gpt names what is wrong with a file that has none
  try {
    kind = ex::GPTConfig::from_metadata(saccade::nn::read_safetensors_header(checkpoint).metadata).tokenizer;
  } catch (const saccade::Error&) {
  }
  std::vector<std::string> files;  // what the model needs beside it
  if (kind == "bpe") files = {"tokenizer.model"};
#ifdef SACCADE_HAVE_HF
  if (kind == "hf") files.assign(ex::kHFTokenizerFiles.begin(), ex::kHFTokenizerFiles.end());
#endif
  const std::string from_dir = folder_of(checkpoint), to_dir = folder_of(to);
  std::error_code ec;
  const bool same_folder = fs::equivalent(from_dir, to_dir, ec);
  for (const std::string& f : same_folder ? std::vector<std::string>{} : files) {
    const std::string src = from_dir + "/" + f, dst = to_dir + "/" + f;
    // an hf model's folder may hold no tokenizer.model, say, but one left there would be read
    if (fs::exists(dst) && (fs::exists(src) ? read_file(src) != read_file(dst) : kind == "hf"))
      throw cli::UsageError(
          "--to", fmt::format("'{}' holds another tokenizer than '{}': export to another folder", dst,
                              fs::exists(src) ? src : from_dir));
  }
  ex::export_gpt(checkpoint, to, saccade::DType::BFloat16);
  std::printf("wrote %s (bfloat16 weights of %s)\n", to.c_str(), checkpoint.c_str());
  if (files.empty() || same_folder) return;
  if (kind == "bpe") {
    const std::string src = ex::tokenizer_path(from_dir), dst = ex::tokenizer_path(to_dir);
    if (!fs::exists(src)) {
      std::fprintf(stderr, "gpt: no %s beside the checkpoint: `gpt sample` will need --tokenizer FILE\n",
                   src.c_str());
      return;
    }
    fs::copy_file(src, dst, fs::copy_options::overwrite_existing);
    std::printf("wrote %s (the bpe tokenizer the weights need)\n", dst.c_str());
  }
#ifdef SACCADE_HAVE_HF
  if (kind == "hf") {
    if (ex::copy_hf_tokenizer(from_dir, to_dir) == 0) {
      std::fprintf(stderr,
                   "gpt: no tokenizer beside the checkpoint in %s: `gpt sample` will need --tokenizer DIR\n",
                   from_dir.c_str());
      return;
    }
    std::printf("wrote the tokenizer the weights need into %s (from %s)\n", to_dir.c_str(), from_dir.c_str());
  }
#endif
}

// The tokenizer of `model`: byte tokens; its bpe model from `file` (gpt sample --tokenizer) or from the
// tokenizer.model beside `checkpoint`; or, for a model fine-tuned from a Hugging Face folder ("hf"), that
// folder's tokenizer from the folder `file` or from the checkpoint's folder. Throws cli::UsageError for a
// file given to a byte model, a missing file, a bpe tokenizer of another vocabulary size than the model's,
// and an hf tokenizer of more ids than the model's embedding has rows.
std::unique_ptr<ex::Tokenizer> load_tokenizer(const ex::GPT& model, const std::string& checkpoint,
                                              const std::string& file) {
  const std::string name = model.config().tokenizer;
#ifdef SACCADE_HAVE_HF
  if (name == "hf") {
    namespace fs = std::filesystem;
    const std::string folder = file.empty() ? folder_of(checkpoint) : file;
    bool present = false;
    for (const char* f : {"tokenizer.json", "vocab.json", "tokenizer.model"})
      present = present || fs::exists(fs::path(folder) / f);
    if (!present)
      throw cli::UsageError("--tokenizer",
                            fmt::format("the model in '{}' needs the tokenizer of the Hugging "
                                        "Face folder it was fine-tuned from, and '{}' holds none "
                                        "(tokenizer.json, vocab.json, tokenizer.model): name its "
                                        "folder with --tokenizer DIR",
                                        checkpoint, folder));
    std::unique_ptr<ex::Tokenizer> tok = ex::make_tokenizer(name, folder);
    if (tok->vocab_size() > model.config().vocab_size)
      throw cli::UsageError("--tokenizer",
                            fmt::format("the tokenizer in '{}' has {} ids, the model in '{}' "
                                        "embeds {}: not its tokenizer",
                                        folder, tok->vocab_size(), checkpoint, model.config().vocab_size));
    return tok;
  }
#endif
  if (name != "bpe") {
    if (!file.empty())
      throw cli::UsageError("--tokenizer", fmt::format("the model in '{}' reads {} tokens: it needs no "
                                                       "tokenizer file",
                                                       checkpoint, name));
    return ex::make_tokenizer(name);
  }
  const std::string path = file.empty() ? tokenizer_beside(checkpoint) : file;
  if (!std::filesystem::exists(path))
    throw cli::UsageError("--tokenizer",
                          fmt::format("the model in '{}' needs its bpe tokenizer, and there is "
                                      "no '{}': name it with --tokenizer FILE",
                                      checkpoint, path));
  auto tok = std::make_unique<ex::SentencePieceTokenizer>(path);
  if (tok->vocab_size() != model.config().vocab_size)
    throw cli::UsageError("--tokenizer",
                          fmt::format("'{}' has {} pieces, the model in '{}' {}: not its "
                                      "tokenizer",
                                      path, tok->vocab_size(), checkpoint, model.config().vocab_size));
  return tok;
}

// The distinct characters (UTF-8 code points; a byte that starts none counts as itself) of `text`, line
// breaks and tabs excepted: what SentencePiece's trainer counts as the characters a vocabulary must hold (it
// reads line by line, and leaves out the tab, its pretokenization boundary).
int64_t distinct_characters(const std::string& text) {
  std::set<std::string> seen;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    n = std::min(n, text.size() - i);
    if (text[i] != '\n' && text[i] != '\t') seen.insert(text.substr(i, n));
    i += n;
  }
  return static_cast<int64_t>(seen.size());
}

// Refuses (--data) a corpus with a split too small for a run: a validation stream of fewer than 2 tokens
// scores nothing, a training stream shorter than one window (`context` + 1 tokens) gives no window. With
// `train_tokens` and `valid_tokens` -1 (before the tokenizer), the streams' bytes are checked instead: no
// tokenizer here makes more tokens than bytes.
void require_usable_splits(const std::string& dir, const ex::FortunesCorpus& c, int64_t context,
                           int64_t train_tokens = -1, int64_t valid_tokens = -1) {
  auto size = [](int64_t documents, size_t bytes, int64_t tokens) {
    return fmt::format("{} document{}, {} bytes{}", documents, documents == 1 ? "" : "s", bytes,
                       tokens >= 0 ? fmt::format(", {} tokens", tokens) : "");
  };
  const auto valid = valid_tokens >= 0 ? valid_tokens : static_cast<int64_t>(c.valid.size());
  const auto train = train_tokens >= 0 ? train_tokens : static_cast<int64_t>(c.train.size());
  if (valid < 2)
    throw cli::UsageError("--data",
                          fmt::format("the validation split of '{}' is {}: too small to score (need 2 "
                                      "tokens or more; docs/data.md's split puts 1 document in 10 there)",
                                      dir, size(c.valid_documents, c.valid.size(), valid_tokens)));
  if (train < context + 1)
    throw cli::UsageError("--data",
                          fmt::format("the training split of '{}' is {}: shorter than one window of "
                                      "--context {} + 1 tokens",
                                      dir, size(c.train_documents, c.train.size(), train_tokens), context));
}

// The model a training checkpoint (OUT/last.safetensors) holds, from its header alone.
ex::GPTConfig saved_config(const std::string& path) {
  try {
    return ex::GPTConfig::from_metadata(saccade::nn::read_safetensors_header(path).metadata);
  } catch (const saccade::Error& e) {
    throw saccade::Error(fmt::format("--resume: '{}': {}", path, e.what()));
  }
}

// --resume's refusal of a checkpoint of another model than the one this command builds.
cli::UsageError different_model(const std::string& path, const ex::GPTConfig& saved,
                                const std::string& ours) {
  return cli::UsageError("--resume",
                         fmt::format("'{}' holds a different model ({}) than this one ({}); nothing "
                                     "was changed",
                                     path, saved.describe(), ours));
}

// A folder a command writes (`flag`: --out, --save-hf, export's --hf) that is, under any spelling, the folder
// it reads (`read_flag`: --hf, --init-from-hf, --from-hf, --adapter): what it writes would land among the
// model's files or replace them; refused before anything is written, the message ending in `instead`.
void refuse_write_over_read(const char* flag, const std::string& written, const char* read_flag,
                            const std::string& read, const char* instead) {
  std::error_code ec;
  if (!read.empty() && std::filesystem::equivalent(written, read, ec))
    throw cli::UsageError(flag, fmt::format("'{}' is the folder {} reads: {}", written, read_flag, instead));
}

// --out naming the model folder a run reads (--hf, --init-from-hf): the run's files (its checkpoints, log,
// plot, adapter) would land among the model's, and a later save could replace them.
void refuse_out_over_model(const std::string& out_dir, const char* model_flag, const std::string& model) {
  refuse_write_over_read("--out", out_dir, model_flag, model, "write the run to another folder");
}

// The lock of a training run on its --out folder (ex::RunLock); a folder another run holds is refused.
std::unique_ptr<ex::RunLock> lock_out(const std::string& out_dir) {
  long holder = -1;
  std::unique_ptr<ex::RunLock> lock = ex::RunLock::acquire(out_dir, &holder);
  if (!lock)
    throw cli::UsageError(
        "--out", fmt::format("'{}' is in use by another training run ({}): wait for it to end, or give "
                             "another --out",
                             out_dir, holder > 0 ? fmt::format("process {}", holder) : "process id unknown"));
  return lock;
}

// Why a run that reached `step` ended: its --stop-at, its --steps, or its --time-limit.
std::string why_ended(const ex::GPTTrainOptions& o, int64_t step) {
  if (o.stop_at > 0 && step >= o.stop_at && o.stop_at < o.steps)
    return fmt::format("stopped at --stop-at {}", o.stop_at);
  if (step >= o.steps) return fmt::format("reached --steps {}", o.steps);
  return fmt::format("the --time-limit of {} s ended the run", o.time_limit);
}

// --stop-at past --steps would never be reached: the run would end at --steps, saved as finished, not as the
// interrupted run the user asked for.
void check_stop_at(int64_t stop_at, int64_t steps) {
  if (stop_at > steps)
    throw cli::UsageError("--stop-at",
                          fmt::format("{} is past --steps {} (the run would end at step {} without "
                                      "stopping there)",
                                      stop_at, steps, steps));
}

// --arch's values: gpt2, llama and, where hf/ is built, every other decoder row of its table
std::vector<std::string> arch_names() {
  std::vector<std::string> names = {"gpt2", "llama"};
#ifdef SACCADE_HAVE_HF
  for (const std::string& t : saccade::hf::supported_model_types())
    if (t != "gpt2" && t != "llama") names.push_back(t);
#endif
  return names;
}

// The checks of `gpt train`'s flags that involve more than one flag or a path, before any work
// (cli::UsageError naming the flag).
void check_train_flags(const ex::GPTTrainOptions& o, const ex::GPTConfig& config, int64_t vocab,
                       const std::string& out_dir) {
  check_stop_at(o.stop_at, o.steps);
  if (o.batch_size % o.grad_accum != 0)
    throw cli::UsageError("--grad-accum",
                          fmt::format("{} does not divide --batch-size {}", o.grad_accum, o.batch_size));
  if (config.d_model % config.n_head != 0)
    throw cli::UsageError("--n-head",
                          fmt::format("{} does not divide --d-model {}", config.n_head, config.d_model));
  if (config.arch == "gpt2" && (config.n_kv_head != 0 || config.rope_theta != 10000.0 || config.window != 0))
    throw cli::UsageError(config.n_kv_head != 0      ? "--n-kv-head"
                          : config.rope_theta != 1e4 ? "--rope-theta"
                                                     : "--window",
                          "not for --arch gpt2 (learned positions, full attention)");
  if (config.arch != "gpt2" && config.n_head % config.kv_heads() != 0)
    throw cli::UsageError("--n-kv-head",
                          fmt::format("{} does not divide --n-head {}", config.n_kv_head, config.n_head));
  if (config.arch != "gpt2" && (config.d_model / config.n_head) % 2 != 0)
    throw cli::UsageError("--n-head", fmt::format("the head size --d-model / --n-head = {} is odd (rotary "
                                                  "positions rotate pairs)",
                                                  config.d_model / config.n_head));
  if (config.arch != "gpt2" && config.arch != "llama") {  // the row's config.json must say these sizes
    ex::GPTConfig sized = config;
    sized.vocab_size = vocab;
    try {
      sized.check();
    } catch (const saccade::Error& e) {
      throw cli::UsageError("--arch", e.what());
    }
  }

  cli::require_writable_directory("--out", out_dir);
  // What one micro-batch's forward keeps for its backward, roughly (float32): per token, each block's ~18 d
  // activations (attention through flash_attention: no T x T weights), the embeddings and final norm, and
  // the logits with their gradient. A context that cannot fit in memory is refused here, not after minutes.
  const double micro = static_cast<double>(o.batch_size / o.grad_accum);
  const double bytes =
      4.0 * micro * static_cast<double>(config.context) *
      static_cast<double>(config.n_layer * 18 * config.d_model + 3 * config.d_model + 2 * vocab);
  const double ram =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (o.device.is_cpu() && ram > 0 && bytes > ram)
    throw cli::UsageError(
        "--context",
        fmt::format("a step of {} windows of {} tokens would hold about {:.0f} GB of activations, more "
                    "than this machine's {:.0f} GB: lower --context or --batch-size, or raise "
                    "--grad-accum",
                    micro, config.context, bytes / 1e9, ram / 1e9));
}

#ifdef SACCADE_HAVE_HF
// A model folder in the Hugging Face layout, loaded: GPT-2 into this example's GPT, Llama into
// nn::LlamaForCausalLM, with the folder's own tokenizer.
struct HFModel {
  std::shared_ptr<ex::GPT> gpt;
  std::shared_ptr<saccade::nn::LlamaForCausalLM> llama;
  std::unique_ptr<ex::CausalLM> lm;
  std::unique_ptr<saccade::hf::Tokenizer> tok;
  saccade::hf::Config config;  // the folder's config.json, as read
  std::string description;
  // the model, whichever family
  saccade::nn::Module& base() { return gpt ? static_cast<saccade::nn::Module&>(*gpt) : *llama; }
  // how PEFT's files name its modules: GPT-2's Conv1D names and fused c_attn, or the Llama family's (fused
  // on disk for Phi-3 and GPT-NeoX)
  saccade::hf::AdapterLayout adapter_layout() const {
    return gpt ? ex::gpt2_adapter_layout(gpt->config().n_layer) : saccade::hf::llama_adapter_layout(*llama);
  }
};

// The tensors a non-strict load skipped, on one line (nothing when none).
void report_skipped(const saccade::hf::LoadReport& r, const std::string& dir) {
  if (!r.skipped.empty())
    std::printf("--non-strict: %zu tensor(s) of %s skipped: %s\n", r.skipped.size(), dir.c_str(),
                fmt::format("{}", fmt::join(r.skipped, ", ")).c_str());
}

// How many modules, in PEFT's names, carry an adapter: one A each (GPT-2's c_attn shares one among three
// Linears).
size_t adapted_modules(const saccade::nn::Module& model) {
  std::set<const saccade::nn::Linear*> a;
  for (const auto& [name, lin] : saccade::nn::lora_layers(model)) a.insert(lin->lora_A.get());
  return a.size();
}

// --hf's checks: a GGUF file (NAME.gguf), or a folder holding its config.json.
void require_hf(const std::string& flag, const std::string& path) {
  if (saccade::hf::is_gguf_path(path)) return cli::require_file(flag, path);
  cli::require_directory(flag, path);
  cli::require_file(flag, path + "/config.json");
}

// The model --hf names, as load_hf reads it: a GGUF file's metadata or a folder's config.json.
saccade::hf::Config hf_config_of(const std::string& path) {
  namespace hf = saccade::hf;
  return hf::is_gguf_path(path) ? hf::gguf_config(hf::GgufFile(path))
                                : hf::load_config(path + "/config.json");
}

// With `keep_q8_0` (and no adapter), a GGUF file's Q8_0 Linears multiply by its blocks (inference only);
// otherwise they hold the dequantized weights (to train adapters on them).
HFModel load_hf(const std::string& dir, saccade::Device device, bool strict, const std::string& adapter,
                bool keep_q8_0 = true) {
  namespace hf = saccade::hf;
  HFModel m;
  saccade::hf::LoadReport r;
  if (hf::is_gguf_path(dir)) {  // llama.cpp's file: metadata, tensors and vocabulary in one
    const hf::GgufFile file(dir);
    m.config = hf::gguf_config(file);
    m.tok = hf::gguf_tokenizer(file);
    if (m.config.architecture == hf::Architecture::GPT2)  // dequantized (--quantize q8_0 quantizes again)
      m.gpt = ex::load_hf_gpt2(hf::GgufWeights(file, m.config), m.config, strict, &r);
    else  // Q8_0 tensors stay quantized for sampling and scoring (dequantized under an adapter)
      m.llama = hf::load_llama_gguf(file, m.config, keep_q8_0 && adapter.empty(), strict, &r);
  } else {
    m.config = hf::load_config(dir + "/config.json");
    m.tok = hf::load_tokenizer(dir);
    if (m.config.architecture == hf::Architecture::GPT2)
      m.gpt = ex::load_hf_gpt2(dir, m.config, strict, &r);
    else
      m.llama = hf::load_llama(dir, m.config, strict, &r);
  }
  const hf::Config& config = m.config;
  report_skipped(r, dir);
  if (!adapter.empty()) {
    const hf::AdapterConfig a = hf::load_adapter(adapter, m.base(), dir, m.adapter_layout());
    std::printf("LoRA adapter from %s: r %lld, lora_alpha %g, %zu modules\n", adapter.c_str(),
                static_cast<long long>(a.lora.r), a.lora.lora_alpha, adapted_modules(m.base()));
  }
  m.base().to(device);
  m.lm = m.gpt ? ex::as_causal_lm(*m.gpt) : ex::as_causal_lm(*m.llama);
  if (m.tok->vocab_size() > m.lm->vocab_size())
    throw saccade::Error(fmt::format("gpt: '{}': the tokenizer has {} ids, the model's vocabulary {}", dir,
                                     m.tok->vocab_size(), m.lm->vocab_size()));
  m.description = config.describe() + ", tokenizer " + m.tok->name();
  return m;
}

// `gpt sample --hf`: each prompt encoded as the folder's tokenizer encodes it (its special tokens
// included), cut from the left to the context, continued; the text streamed, then the new ids (with
// --print-ids) and the speed.
void run_hf_samples(HFModel& m, const std::vector<std::string>& prompts, const ex::SamplingOptions& opts,
                    bool print_ids) {
  for (const std::string& prompt : prompts) {
    const std::vector<int64_t> ids = fit_prompt_warning(m.tok->encode(prompt, true), m.lm->context());
    std::printf("---\n%s", prompt.c_str());
    std::fflush(stdout);
    TextStream stream{[&](const std::vector<int64_t>& new_ids) { return m.tok->decode(new_ids); }, {}, ""};
    const auto start = std::chrono::steady_clock::now();
    ex::Generation g = ex::generate(*m.lm, {ids}, opts, true, false, stream);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("\n");
    if (print_ids) std::printf("ids: %s\n", fmt::format("{}", fmt::join(g.tokens[0], " ")).c_str());
    std::printf("generated %zu tokens after a prompt of %zu in %.2f s: %.1f tokens/s (prefill included)\n",
                g.tokens[0].size(), ids.size(), seconds, static_cast<double>(g.tokens[0].size()) / seconds);
  }
}

// `gpt finetune`'s flags.
struct FinetuneArgs {
  std::string hf, data, val, out = "finetune_out", targets, truncate = "refuse", dtype = "f32";
  saccade::nn::LoraConfig lora;
  ex::FinetuneOptions opts;
  bool non_strict = false, resume = false, pack = false, checkpoint_activations = false;
  FinetuneArgs() { lora.r = 16, lora.lora_alpha = 32; }  // the flags' defaults (PEFT's examples)
};

// The examples of a JSONL file, tokenized as the model's tokenizer encodes text (no special tokens), with its
// BOS first where encode(text, true) adds one, and its EOS last.
std::vector<ex::TokenizedExample> read_examples(const std::string& path, const saccade::hf::Tokenizer& tok,
                                                int64_t context, ex::Truncate truncate) {
  const std::vector<int64_t> specials = tok.encode("", true);
  const int64_t bos =
      !specials.empty() && tok.bos_id() && specials.front() == *tok.bos_id() ? *tok.bos_id() : -1;
  const int64_t eos = tok.eos_id().value_or(-1);
  const ex::Encode encode = [&](const std::string& text) { return tok.encode(text, false); };
  std::vector<ex::TokenizedExample> out;
  const std::vector<ex::InstructRecord> records = ex::read_jsonl(path);
  for (const ex::InstructRecord& r : records) {
    try {
      out.push_back(ex::tokenize_example(r, encode, bos, eos, context, truncate));
    } catch (const saccade::Error& e) {
      throw saccade::Error(fmt::format("'{}': {}", path, e.what()));
    }
  }
  return out;
}

// `gpt finetune`: LoRA adapters on a Hugging Face GPT-2 or Llama-family folder, trained on a JSONL file's
// completions, saved in PEFT's layout in OUT/adapter.
int run_finetune(FinetuneArgs& a, saccade::Device device) {
  namespace nn = saccade::nn;
  check_stop_at(a.opts.stop_at, a.opts.steps);
  require_hf("--hf", a.hf);
  cli::require_file("--data", a.data);
  if (!a.val.empty()) cli::require_file("--val", a.val);
  refuse_out_over_model(a.out, "--hf", a.hf);
  cli::OutputDir out("--out", a.out);                   // removed again if the run fails empty
  std::unique_ptr<ex::RunLock> lock = lock_out(a.out);  // released before `out` is cleaned up
  const bool gpt2 = hf_config_of(a.hf).architecture == saccade::hf::Architecture::GPT2;
  if (a.targets.empty()) a.targets = gpt2 ? "c_attn" : "q_proj,v_proj";  // PEFT's defaults for the family
  a.lora.target_modules.clear();
  for (size_t start = 0; start <= a.targets.size();) {
    const size_t comma = std::min(a.targets.find(',', start), a.targets.size());
    if (comma > start) a.lora.target_modules.push_back(a.targets.substr(start, comma - start));
    start = comma + 1;
  }
  if (a.lora.target_modules.empty()) throw cli::UsageError("--lora-targets", "name at least one module");
  HFModel m = load_hf(a.hf, saccade::Device::cpu(), !a.non_strict, "", /*keep_q8_0=*/false);
  nn::Module& model = m.base();
  std::printf("%s, from %s\n", m.description.c_str(), a.hf.c_str());
  const ex::Truncate truncate = a.truncate == "right" ? ex::Truncate::Right : ex::Truncate::Refuse;
  const auto train = read_examples(a.data, *m.tok, m.lm->context(), truncate);
  const auto val = a.val.empty() ? std::vector<ex::TokenizedExample>{}
                                 : read_examples(a.val, *m.tok, m.lm->context(), truncate);
  std::printf("%zu training examples (%lld scored tokens), %zu validation examples\n", train.size(),
              static_cast<long long>(ex::scored_targets(train)), val.size());
  saccade::Generator gen(a.opts.seed);
  // the frozen base held in 16 bits (half the memory, the GEMMs in 16 bits); the adapters stay float32
  if (cli::dtype(a.dtype) != saccade::DType::Float32) {
    model.to(cli::dtype(a.dtype));
    std::printf("the base in %s, the adapters in float32\n",
                std::string(saccade::dtype_name(cli::dtype(a.dtype))).c_str());
  }
  const saccade::hf::AdapterLayout layout = m.adapter_layout();
  const std::vector<std::string> adapted = nn::apply_lora(model, a.lora, &gen, layout.units);
  model.to(device);
  // recomputed in the backward, LoRA's dropout replayed
  if (m.llama)
    for (auto& block : m.llama->model->layers)
      block->checkpoint_activations = a.checkpoint_activations, block->checkpoint_generators = {&gen};
  else
    for (auto& block : m.gpt->h)
      block->checkpoint_activations = a.checkpoint_activations, block->checkpoint_generators = {&gen};
  int64_t trainable = 0;
  for (const auto& p : nn::trainable_parameters(model)) trainable += p.numel();
  std::printf("LoRA r %lld, lora_alpha %g on %zu modules: %lld trainable parameters of %lld\n",
              static_cast<long long>(a.lora.r), a.lora.lora_alpha, adapted.size(),
              static_cast<long long>(trainable), static_cast<long long>(model.num_parameters()));
  const ex::LogitsFn logits = [&](const saccade::Tensor& idx) {
    return m.gpt ? m.gpt->forward(idx.to(device)) : m.llama->forward(idx.to(device));
  };
  if (a.pack) {  // a step's examples in rows of the context, each attending to itself only
    a.opts.pack = m.lm->context();
    std::printf("packing each step's examples into rows of %lld tokens, each attending to itself only\n",
                static_cast<long long>(a.opts.pack));
    a.opts.packed_logits = [&](const saccade::Tensor& idx, const saccade::Tensor& docs) {
      return m.gpt ? m.gpt->forward(idx.to(device), docs.to(device))
                   : m.llama->forward(idx.to(device), docs.to(device));
    };
  }
  const int64_t pad = m.tok->eos_id().value_or(0);
  a.opts.checkpoint = a.out + "/last.safetensors";  // after every evaluation and at the end
  a.opts.resume = a.resume;
  a.opts.generator = &gen;
  if (a.resume && !std::filesystem::exists(a.opts.checkpoint))
    std::printf("--resume: no checkpoint at %s: starting a fresh run\n", a.opts.checkpoint.c_str());
  const auto start = std::chrono::steady_clock::now();
  const ex::FinetuneLog log =
      ex::finetune_lora(model, logits, train, val, a.opts, pad, [](const std::string& line) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string adapter = a.out + "/adapter";
  saccade::hf::save_adapter(adapter, model, a.lora, a.hf, layout);
  saccade::hf::write_file_atomic(a.out + "/log.csv", ex::finetune_log_csv(log), "gpt finetune");
  if (ex::plots_available()) {
    ex::LinePlot plot;
    plot.title = "LoRA fine-tuning", plot.x_label = "step", plot.y_label = "loss (nats per completion token)";
    plot.legend_right = true;
    ex::Series train_curve{{}, {}, "training loss"};
    for (size_t i = 0; i < log.train_loss.size(); ++i) {
      train_curve.x.push_back(static_cast<double>(i + 1));
      train_curve.y.push_back(log.train_loss[i]);
    }
    ex::Series val_curve{{}, {}, "validation loss", ex::Series::Style::Dashed};
    for (const auto& [step, loss] : log.val_loss) {
      val_curve.x.push_back(static_cast<double>(step));
      val_curve.y.push_back(loss);
    }
    plot.series = {train_curve};
    if (!val_curve.x.empty()) plot.series.push_back(val_curve);
    ex::write_line_plot(a.out + "/loss.png", plot);
  }
  std::printf("trained in %.1f s; wrote %s (PEFT's layout: gpt sample --hf %s --adapter %s), %s/log.csv%s\n",
              seconds, adapter.c_str(), a.hf.c_str(), adapter.c_str(), a.out.c_str(),
              ex::plots_available() ? ", loss.png" : "");
  return 0;
}

// `gpt export --from-hf DIR --adapter A --merge --hf OUT`: the GPT-2 or Llama folder DIR with the LoRA
// adapter A folded into its weights (PEFT's merge_and_unload, then save_pretrained), written to OUT in DIR's
// dtype with DIR's config and tokenizer files: a plain checkpoint that transformers and `gpt sample --hf`
// load without PEFT.
void export_merged(const std::string& from_hf, const std::string& adapter, bool merge,
                   const std::string& to) {
  namespace hf = saccade::hf;
  if (to.empty()) throw cli::UsageError("--hf", "give the folder to write the merged model to (--hf OUT)");
  if (adapter.empty())
    throw cli::UsageError("--from-hf",
                          "exports a LoRA adapter folded into its base: give --adapter A --merge");
  if (!merge)
    throw cli::UsageError("--adapter",
                          "add --merge: the export folds the adapter into the base's weights "
                          "(an adapter alone is already in PEFT's layout)");
  cli::require_directory("--from-hf", from_hf);
  cli::require_file("--from-hf", from_hf + "/config.json");
  cli::require_directory("--adapter", adapter);
  cli::require_file("--adapter", adapter + "/adapter_config.json");
  refuse_write_over_read("--hf", to, "--from-hf", from_hf, "export to another folder");
  refuse_write_over_read("--hf", to, "--adapter", adapter, "export to another folder");
  cli::require_writable_directory("--hf", to);
  HFModel m = load_hf(from_hf, saccade::Device::cpu(), true, adapter);
  const size_t merged = adapted_modules(m.base());
  saccade::nn::merge_and_unload(m.base());
  hf::Config config = m.config;  // saved with the merged weights' dtype
  const saccade::DType dtype = config.torch_dtype == "bfloat16"  ? saccade::DType::BFloat16
                               : config.torch_dtype == "float16" ? saccade::DType::Float16
                                                                 : saccade::DType::Float32;
  config.torch_dtype = std::string(saccade::dtype_name(dtype));
  hf::save_pretrained(to, config,
                      m.gpt ? hf::export_weights(*m.gpt, ex::gpt2_name_table(m.gpt->config().n_layer), dtype)
                            : hf::export_weights(*m.llama, hf::llama_name_table(*m.llama), dtype));
  ex::copy_hf_tokenizer(from_hf, to);
  std::printf("wrote %s: %s with the adapter %s merged into %zu modules (%s; config and tokenizer of %s)\n",
              to.c_str(), from_hf.c_str(), adapter.c_str(), merged, config.torch_dtype.c_str(),
              from_hf.c_str());
}
#endif

}  // namespace

int main(int argc, char** argv) {
  saccade::use_best_blas_core(argv);   // OpenBLAS at the CPU's width (ops/blas.h); may re-execute once
  mallopt(M_MMAP_THRESHOLD, 1 << 30);  // keep big freed blocks in the heap (see image_caption/main.cpp)
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"A GPT (GPT-2's architecture) trained on Debian's fortunes and sampled with a KV cache"};
  cli::setup(app);
  app.require_subcommand(1);
  std::string device_name = "cpu", out_dir = "gpt_out", data_dir = ex::kFortunesDir, checkpoint,
              tokenizer = "byte", tokenizer_file;
  int64_t threads = 0;
  ex::GPTConfig config;
  ex::GPTTrainOptions topts;
  ex::SamplingOptions sopts, train_sopts;
  train_sopts.temperature = 0.8;  // the end-of-training sample
  uint64_t model_seed = 0;
  int64_t sample_tokens = 300, num_samples = 1, vocab_size = 2048, attention_layer = -1;
  std::string attention_png, dtype_name = "f32", export_to, quantize;
  bool distributed = false;
  bool checkpoint_activations = false;
  std::vector<std::string> prompts;
  std::string hf_dir, eval_data, init_from_hf, save_hf, adapter_dir;
  bool print_ids = false, non_strict = false;
  // `phase`: what the sampling flags shape ("the end-of-training sample: " under train)
  auto common = [&](CLI::App* sub, ex::SamplingOptions& so, const std::string& phase) {
    sub->add_option("--device", device_name, "cpu, or cuda / cuda:N when built with CUDA");
    sub->add_option("--threads", threads, "CPU threads (0: OMP_NUM_THREADS, else all cores)")
        ->check(cli::integer(0, 4096));
    sub->add_option("--out", out_dir, "directory of the checkpoints (last.safetensors, best.safetensors)");
    sub->add_option("--temperature", so.temperature, phase + "sampling temperature (0: greedy)")
        ->check(cli::non_negative_real());
    sub->add_option("--top-k", so.top_k, phase + "sample among the k most likely tokens (0: all)")
        ->check(cli::integer(0));
    sub->add_option("--top-p", so.top_p,
                    phase + "nucleus sampling: the most likely tokens holding this probability")
        ->check(cli::real(0, false, 1, true));
  };
  CLI::App* train = app.add_subcommand("train", "train on the fortunes and report validation bits per byte");
  common(train, train_sopts, "only for the sample at the end of training: ");
  train->add_option("--data", data_dir, "folder of the fortune files");
  train->add_option("--tokenizer", tokenizer, "byte, or bpe (SentencePiece, trained on the training stream)")
      ->check(CLI::IsMember({"byte", "bpe"}));
  train
      ->add_option("--vocab-size", vocab_size,
                   "pieces of the bpe tokenizer (1000-4000 work well; at least 259 + the training stream's "
                   "characters: "
                   "366 for the fortunes)")
      ->check(cli::integer(260, 65536));
  train->add_option("--steps", topts.steps, "optimizer steps (with --time-limit: the most)")
      ->check(cli::integer(1));
  train
      ->add_option("--time-limit", topts.time_limit,
                   "seconds of training (scoring excluded); the cosine decay then runs over time (0: none)")
      ->check(cli::non_negative_real());
  train->add_option("--batch-size", topts.batch_size, "windows per step (over ranks and accumulation)")
      ->check(cli::integer(1));
  train->add_option("--grad-accum", topts.grad_accum, "micro-batches per step (divides --batch-size)")
      ->check(cli::integer(1));
  train->add_option("--lr", topts.lr, "AdamW's peak learning rate")->check(cli::positive_real());
  train->add_option("--min-lr", topts.min_lr, "learning rate at the end of the cosine decay")
      ->check(cli::non_negative_real());
  train->add_option("--warmup", topts.warmup, "linear warmup steps")->check(cli::integer(0));
  train->add_option("--weight-decay", topts.weight_decay, "AdamW weight decay of the block matrices")
      ->check(cli::non_negative_real());
  train->add_option("--clip", topts.clip, "max gradient norm")->check(cli::positive_real());
  train
      ->add_option("--eval-every", topts.eval_every,
                   "steps between validation scores and checkpoints (0: at the end only)")
      ->check(cli::integer(0));
  train->add_option("--eval-tokens", topts.eval_tokens, "validation tokens scored during training (-1: all)")
      ->check(cli::integer_or(-1, 1));
  train
      ->add_option("--context", config.context,
                   "context length (block size); with --init-from-hf, the model's is cropped to it (as "
                   "nanoGPT's crop_block_size)")
      ->check(cli::integer(1, 65536));
  train->add_option("--n-layer", config.n_layer, "blocks")->check(cli::integer(1, 1024));
  train->add_option("--n-head", config.n_head, "attention heads (divides --d-model)")
      ->check(cli::integer(1, 4096));
  train->add_option("--d-model", config.d_model, "width of the residual stream")
      ->check(cli::integer(1, 65536));
  train
      ->add_option("--arch", config.arch,
                   "the block: gpt2 (learned positions, LayerNorm, GELU, tied output), llama (rotary "
                   "positions, RMSNorm, SwiGLU, grouped-query attention) or another Hugging Face row at its "
                   "config class's defaults with these sizes (qwen3, gemma3_text, gpt_neox, mixtral: 8 "
                   "experts, top-2, ...)")
      ->check(CLI::IsMember(arch_names()));
  train
      ->add_option("--n-kv-head", config.n_kv_head,
                   "not gpt2: key/value heads (divides --n-head; 0: --n-head)")
      ->check(cli::integer(0, 4096));
  train->add_option("--rope-theta", config.rope_theta, "not gpt2: the rotary base")
      ->check(cli::positive_real());
  train
      ->add_option("--window", config.window,
                   "not gpt2: sliding-window attention, each position sees the last W (0: the whole context; "
                   "another row: its default)")
      ->check(cli::integer(0));
  // a 10-minute run sees the training stream under 3 times and underfits: no dropout by default (GPT-2: 0.1)
  config.dropout = 0.0;
  train->add_option("--dropout", config.dropout, "dropout probability (GPT-2's is 0.1)")
      ->check(cli::probability_below_one());
  train->add_option("--seed", model_seed, "seed of the init, the dropout and the training windows")
      ->check(cli::seed());
  train->add_flag(
      "--resume", topts.resume,
      "continue from OUT/last.safetensors (without one: says so and starts fresh); another model shape is "
      "refused");
  train->add_option("--profile", topts.profile_trace,
                    "profile steps 2-4: a Chrome trace (Perfetto, chrome://tracing) here, a PNG beside it");
  train
      ->add_option("--stop-at", topts.stop_at,
                   "stop after this step (saved: --resume continues the run; default: none)")
      ->check(cli::integer(1))
      ->default_str("");
  train->add_option("--sample-tokens", sample_tokens, "tokens to sample from the best model at the end")
      ->check(cli::integer(0));
  train
      ->add_option(
          "--dtype", dtype_name,
          "precision of the forward: f32, bf16 (autocast) or f16 (autocast and loss scaling); weights, "
          "gradients and AdamW stay float32")
      ->check(cli::dtype_choices());
  train->add_flag("--distributed", distributed,
                  "data-parallel over the ranks of mpirun (--batch-size is global; rank 0 prints and saves)");
  train->add_flag("--checkpoint-activations", checkpoint_activations,
                  "recompute each block during backward instead of keeping its activations (less memory, one "
                  "more forward per block)");
#ifdef SACCADE_HAVE_HF
  auto* init_flag =
      train->add_option("--init-from-hf", init_from_hf,
                        "fine-tune a Hugging Face GPT-2 or Llama folder (its weights, sizes and tokenizer; "
                        "dropout 0) instead of a new model");
  for (const char* f : {"--n-layer", "--n-head", "--d-model", "--tokenizer", "--vocab-size", "--dropout",
                        "--arch", "--n-kv-head", "--rope-theta", "--window"})
    init_flag->excludes(train->get_option(f));
  train
      ->add_flag("--non-strict", non_strict,
                 "with --init-from-hf: skip checkpoint tensors the model has no place for, listing them "
                 "(default: refuse)")
      ->needs(init_flag);
  train->add_option(
      "--save-hf", save_hf,
      "also write the best model to this folder in the Hugging Face layout of its arch (config.json, "
      "model.safetensors, its tokenizer), for transformers and `gpt sample --hf`");
#endif
  CLI::App* sample = app.add_subcommand("sample", "generate text from a checkpoint (stdin when no --prompt)");
  common(sample, sopts, "");
  sample->add_option("--checkpoint", checkpoint, "checkpoint (default: OUT/best.safetensors)");
  sample->add_option("--tokenizer", tokenizer_file,
                     "the bpe model's tokenizer.model, or the folder of a fine-tuned Hugging Face model's "
                     "tokenizer (default: beside --checkpoint)");
  sample->add_option("--prompt", prompts, "prompt text (repeat for several prompts)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sample->add_option("--max-new-tokens", sopts.max_new_tokens, "tokens to generate")->check(cli::integer(0));
  sample->add_option("--seed", sopts.seed, "seed of the sampling")->check(cli::seed());
  sample->add_option("--attention-png", attention_png,
                     "write the attention of each head over the sample here");
  sample
      ->add_option("--attention-layer", attention_layer,
                   "the block drawn by --attention-png (-1: the last, -2 the one before, ...)")
      ->check(cli::integer(-1024, 1023));
  sample->add_option("--num-samples", num_samples, "samples per prompt (one batch, one KV cache per block)")
      ->check(cli::integer(1, 4096));
#ifdef SACCADE_HAVE_HF
  auto* hf_flag =
      sample->add_option("--hf", hf_dir,
                         "a Hugging Face model folder (GPT-2 or Llama: config.json, model.safetensors "
                         "or shards, its tokenizer), or a GGUF file (NAME.gguf: llama, qwen2, qwen3, the "
                         "gemmas, phi3, the MoE rows "
                         "and others; F32, F16, BF16 or Q8_0), to sample instead of a checkpoint");
  hf_flag->excludes(sample->get_option("--checkpoint"))
      ->excludes(sample->get_option("--tokenizer"))
      ->excludes(sample->get_option("--attention-png"))
      ->excludes(sample->get_option("--num-samples"));
  sample->add_flag("--print-ids", print_ids, "with --hf: also print the new token ids, one line 'ids: ...'");
  const std::string non_strict_help =
      "load a folder whose checkpoint has tensors the model has no place for, listing them (default: refuse)";
  sample->add_flag("--non-strict", non_strict, non_strict_help)->needs(hf_flag);
  const std::string adapter_help =
      "a LoRA adapter folder in PEFT's layout (adapter_config.json, adapter_model.safetensors) to apply to "
      "the --hf model";
  sample->add_option("--adapter", adapter_dir, adapter_help)->needs(hf_flag);
  sample
      ->add_option("--dtype", dtype_name,
                   "with --hf: the weights' and the computation's precision, f32, bf16 or f16 (the model is "
                   "converted after loading)")
      ->check(cli::dtype_choices())
      ->needs(hf_flag);
  const std::string quantize_help =
      "q8_0: keep every Linear's weight also in GGUF's Q8_0 (blocks of 32 int8 and a float16 scale) and "
      "multiply by that (inference only)";
  sample->add_option("--quantize", quantize, quantize_help)->check(CLI::IsMember({"q8_0"}))->needs(hf_flag);
  CLI::App* evaluator = app.add_subcommand(
      "eval",
      "score a text file with a Hugging Face model folder: its tokens (no special tokens) in windows of the "
      "context, the first of each unscored; prints tokens, loss (nats/token) and bits_per_byte");
  evaluator->add_option("--hf", hf_dir, "the model folder (GPT-2 or Llama), or a GGUF file (NAME.gguf)")
      ->required();
  evaluator->add_option("--data", eval_data, "the text file to score")->required();
  evaluator->add_flag("--non-strict", non_strict, non_strict_help);
  evaluator->add_option("--adapter", adapter_dir, adapter_help);
  evaluator->add_option("--quantize", quantize, quantize_help)->check(CLI::IsMember({"q8_0"}));
  evaluator->add_option("--device", device_name, "cpu, or cuda / cuda:N when built with CUDA");
  evaluator->add_option("--threads", threads, "CPU threads (0: OMP_NUM_THREADS, else all cores)")
      ->check(cli::integer(0, 4096));
  FinetuneArgs ft;
  CLI::App* finetuner = app.add_subcommand("finetune",
                                           "train LoRA adapters on a Hugging Face model folder with "
                                           "prompt/completion records (JSONL), the loss on "
                                           "the completions only; writes OUT/adapter in PEFT's layout");
  finetuner
      ->add_option("--hf", ft.hf,
                   "the model folder (GPT-2 or a Llama-family row), or a GGUF file (NAME.gguf; Q8_0 weights "
                   "dequantized)")
      ->required();
  finetuner
      ->add_option("--data", ft.data,
                   "training records, one JSON object a line: prompt and completion, or text")
      ->required();
  finetuner->add_option("--val", ft.val, "validation records (same form), scored on the completions");
  finetuner->add_option("--out", ft.out, "the run's folder (OUT/adapter: the adapter)");
  finetuner->add_option("--lora-r", ft.lora.r, "the adapters' rank")->check(cli::integer(1, 4096));
  finetuner->add_option("--lora-alpha", ft.lora.lora_alpha, "scale = alpha / r")->check(cli::positive_real());
  finetuner->add_option("--lora-dropout", ft.lora.lora_dropout, "dropout on the adapters' input")
      ->check(cli::probability_below_one());
  finetuner->add_flag("--rslora", ft.lora.use_rslora, "scale = alpha / sqrt(r) (rank-stabilised LoRA)");
  finetuner->add_option(
      "--lora-targets", ft.targets,
      "modules to adapt, comma-separated names or all-linear (default: PEFT's, q_proj,v_proj, "
      "or c_attn for GPT-2)");
  finetuner->add_option("--steps", ft.opts.steps, "optimizer steps")->check(cli::integer(1));
  finetuner->add_option("--batch-size", ft.opts.batch_size, "examples per step")
      ->check(cli::integer(1, 65536));
  finetuner->add_option("--lr", ft.opts.lr, "AdamW's peak learning rate")->check(cli::positive_real());
  finetuner->add_option("--weight-decay", ft.opts.weight_decay, "AdamW's weight decay of the adapters")
      ->check(cli::non_negative_real());
  finetuner->add_option("--warmup", ft.opts.warmup, "linear warmup steps, then cosine decay to 0")
      ->check(cli::integer(0));
  finetuner->add_option("--eval-every", ft.opts.eval_every, "steps between validation losses (0: at the end)")
      ->check(cli::integer(0));
  finetuner->add_option("--truncate", ft.truncate, "an example past the context: refuse, or cut at the right")
      ->check(CLI::IsMember({"refuse", "right"}));
  finetuner->add_option("--seed", ft.opts.seed, "seed of the adapters' init and the examples' order")
      ->check(cli::seed());
  finetuner->add_flag("--non-strict", ft.non_strict, non_strict_help);
  finetuner
      ->add_option("--stop-at", ft.opts.stop_at,
                   "end after this step, saving the run, as if interrupted (continue with --resume)")
      ->check(cli::integer(1));
  finetuner->add_flag(
      "--resume", ft.resume,
      "continue the run in --out from its last.safetensors (saved at each evaluation and at the "
      "end), exactly as if it had not stopped; the same data, --seed and --batch-size");
  finetuner
      ->add_option("--dtype", ft.dtype,
                   "the frozen base's precision, f32, bf16 or f16 (converted after loading; the adapters, "
                   "their gradients and AdamW's state stay float32, as PEFT's)")
      ->check(cli::dtype_choices());
  finetuner->add_flag("--checkpoint-activations", ft.checkpoint_activations,
                      "keep only each block's input and recompute the block in the backward (less memory, "
                      "one more forward; the same losses)");
  finetuner->add_flag("--pack", ft.pack,
                      "pack each step's examples into rows of the context, each attending to itself only "
                      "(the same loss, fewer rows, no padding)");
  finetuner->add_option("--device", device_name, "cpu, or cuda / cuda:N when built with CUDA");
  finetuner->add_option("--threads", threads, "CPU threads (0: OMP_NUM_THREADS, else all cores)")
      ->check(cli::integer(0, 4096));
#else
  CLI::App* evaluator = nullptr;
  CLI::App* finetuner = nullptr;
#endif
  CLI::App* exporter = app.add_subcommand(
      "export",
      "write a checkpoint's model weights alone, rounded to bfloat16 (half the bytes; for sampling "
      "and PyTorch, not for resuming), and a bpe model's tokenizer.model beside them");
  exporter->add_option("--checkpoint", checkpoint, "checkpoint to read");
  auto* to_flag =
      exporter->add_option("--to", export_to, "the bfloat16 file to write (not the checkpoint read)");
  std::string export_hf;
#ifdef SACCADE_HAVE_HF
  exporter
      ->add_option(
          "--hf", export_hf,
          "instead: write this folder in the Hugging Face layout of its arch (float32 config.json, "
          "model.safetensors and the tokenizer; byte and hf models), for transformers and `gpt sample --hf`")
      ->excludes(to_flag);
  std::string export_from_hf;
  bool export_merge = false;
  exporter->add_option(
      "--from-hf", export_from_hf,
      "instead of --checkpoint: a Hugging Face GPT-2 or Llama folder, exported with --adapter A --merge "
      "to --hf OUT");
  exporter->add_option("--adapter", adapter_dir,
                       "with --from-hf: the LoRA adapter (PEFT's layout) to fold in");
  exporter->add_flag(
      "--merge", export_merge,
      "fold the adapter into the base's weights (PEFT's merge_and_unload): a plain checkpoint");
#endif
  std::vector<std::string> curve_logs, curve_labels;
  std::string curves_png = "curves.png", curves_title = "GPT on fortunes: validation at equal training time";
  CLI::App* curves =
      app.add_subcommand("curves", "draw the validation curves of runs' log.csv files in one PNG");
  curves->add_option("logs", curve_logs, "log.csv files (gpt train's OUT/log.csv, bench/gpt_twin.py's)")
      ->required()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  curves->add_option("--label", curve_labels, "legend text of each log (in order)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  curves->add_option("--png", curves_png, "the picture to write");
  curves->add_option("--title", curves_title, "the picture's title");
  if (int rc = cli::parse(app, argc, argv, "gpt"); rc >= 0) return rc;
  if (*exporter) {
    try {
#ifdef SACCADE_HAVE_HF
      if (!export_from_hf.empty()) {
        if (!checkpoint.empty())
          throw cli::UsageError("--checkpoint", "give --checkpoint or --from-hf, not both");
        export_merged(export_from_hf, adapter_dir, export_merge, export_hf);
        return 0;
      }
      if (!adapter_dir.empty() || export_merge)
        throw cli::UsageError(adapter_dir.empty() ? "--merge" : "--adapter",
                              "merges a LoRA adapter into a Hugging Face folder: give --from-hf DIR");
#endif
      if (checkpoint.empty()) throw cli::UsageError("--checkpoint", "give the checkpoint to read");
      if (export_to.empty() && export_hf.empty())
        throw cli::UsageError("--to", "give the file to write (or --hf FOLDER)");
#ifdef SACCADE_HAVE_HF
      if (!export_hf.empty()) {
        cli::require_file("--checkpoint", checkpoint);
        cli::require_writable_directory("--hf", export_hf);
        std::shared_ptr<ex::GPT> model = ex::load_gpt(checkpoint);
        const std::string name = model->config().tokenizer;
        if (name == "bpe")
          throw cli::UsageError(
              "--hf",
              "a bpe (SentencePiece) model has no tokenizer in the Hugging Face layout here "
              "(byte and hf models export)");
        const std::string folder = folder_of(checkpoint);
        std::unique_ptr<ex::Tokenizer> tok = ex::make_tokenizer(name, folder);
        const auto* hf_tok = dynamic_cast<const ex::HFTokenizer*>(tok.get());
        ex::save_hf_gpt(*model, export_hf, saccade::DType::Float32, hf_tok ? hf_tok->eos_id() : -1, nullptr,
                        hf_tok ? hf_tok->bos_id() : -1);
        if (hf_tok)
          ex::copy_hf_tokenizer(folder, export_hf);
        else
          ex::write_byte_tokenizer_json(export_hf + "/tokenizer.json");
        std::printf("wrote %s: %s in the Hugging Face layout (config.json, model.safetensors, tokenizer)\n",
                    export_hf.c_str(), checkpoint.c_str());
        return 0;
      }
#endif
      export_with_tokenizer(checkpoint, export_to);
      return 0;
    } catch (const std::exception& e) {
      return cli::report("gpt", e);
    }
  }
#ifdef SACCADE_HAVE_HF
  if (finetuner && *finetuner) {
    try {
      const saccade::Device device = cli::device("--device", device_name);
      if (threads > 0) saccade::set_num_threads(static_cast<int>(threads));
      std::printf("device %s, %d CPU threads\n%s\n", device.str().c_str(), saccade::get_num_threads(),
                  saccade::blas_info_line().c_str());
      return run_finetune(ft, device);
    } catch (const std::exception& e) {
      return cli::report("gpt", e);
    }
  }
#endif
  if (*curves) {
    try {
      for (const std::string& log : curve_logs) cli::require_file("logs", log);
      cli::require_writable_file("--png", curves_png);
      write_curves(curves_png, curve_logs, curve_labels, curves_title);
      return 0;
    } catch (const std::exception& e) {
      return cli::report("gpt", e);
    }
  }

  std::optional<dist::Environment> env;
  if (distributed) {
    env.emplace(&argc, &argv);
    if (!dist::is_main_process() && !std::freopen("/dev/null", "w", stdout)) return 1;
  }
  try {
    // before any work: the paths, and the flags that must agree
    if (!topts.profile_trace.empty()) cli::require_trace_path("--profile", topts.profile_trace);
    const saccade::Device device = cli::device("--device", device_name);
    topts.device = device;
    if (*train) check_train_flags(topts, config, tokenizer == "bpe" ? vocab_size : 256, out_dir);
    if (*train)
      cli::require_directory("--data", data_dir, "the fortunes: install Debian's `fortunes`, scripts/setup");
#ifdef SACCADE_HAVE_HF
    std::optional<saccade::hf::Config> hf_config;  // --init-from-hf's config.json, read once
#endif
    if (!init_from_hf.empty()) {
      cli::require_directory("--init-from-hf", init_from_hf);
      cli::require_file("--init-from-hf", init_from_hf + "/config.json");
#ifdef SACCADE_HAVE_HF
      hf_config = saccade::hf::load_config(init_from_hf + "/config.json");
      const int64_t hf_context = hf_config->max_position_embeddings;
      if (*train && train->get_option("--context")->count() > 0 && config.context > hf_context)
        throw cli::UsageError("--context", fmt::format("{} passes the context of '{}' ({})", config.context,
                                                       init_from_hf, hf_context));
#endif
    }
    refuse_out_over_model(out_dir, "--init-from-hf", init_from_hf);
    if (!save_hf.empty()) {
      cli::require_writable_directory("--save-hf", save_hf);
      // the fine-tuned model would replace the pretrained one it was read from
      refuse_write_over_read("--save-hf", save_hf, "--init-from-hf", init_from_hf,
                             "write the fine-tuned model to another folder");
      if (init_from_hf.empty() && tokenizer == "bpe")
        throw cli::UsageError("--save-hf",
                              "a bpe (SentencePiece) model has no tokenizer in the Hugging Face layout here: "
                              "train with --tokenizer byte, or fine-tune with --init-from-hf");
    }
    const bool hf_run = !hf_dir.empty();
    if (hf_run) require_hf("--hf", hf_dir);
    if (!adapter_dir.empty()) {
      cli::require_directory("--adapter", adapter_dir);
      cli::require_file("--adapter", adapter_dir + "/adapter_config.json");
    }
    if (evaluator && *evaluator) cli::require_file("--data", eval_data);
    if (*sample && !hf_run) {
      if (checkpoint.empty()) checkpoint = out_dir + "/best.safetensors";
      cli::require_file(checkpoint == out_dir + "/best.safetensors" ? "--out" : "--checkpoint", checkpoint);
      if (!tokenizer_file.empty() && !std::filesystem::is_directory(tokenizer_file))  // hf: a folder
        cli::require_file("--tokenizer", tokenizer_file);
      if (!attention_png.empty()) cli::require_writable_file("--attention-png", attention_png);
    }
    if (threads > 0) saccade::set_num_threads(static_cast<int>(threads));
    std::printf("device %s, %d CPU threads\n%s\n", device.str().c_str(), saccade::get_num_threads(),
                saccade::blas_info_line().c_str());
#ifdef SACCADE_HAVE_HF
    if (hf_run) {
      HFModel m = load_hf(hf_dir, device, !non_strict, adapter_dir);
      if (cli::dtype(dtype_name) != saccade::DType::Float32) m.lm->module().to(cli::dtype(dtype_name));
      std::printf("%s, from %s\n", m.description.c_str(), hf_dir.c_str());
      if (quantize == "q8_0") {
        // an output layer tied to the embedding (GPT-2's, SmolLM's) is quantized too
        const int64_t n = m.gpt ? m.gpt->quantize_q8_0() : m.llama->quantize_q8_0();
        int64_t bytes = (m.gpt ? m.gpt->output_q8_0 : m.llama->output_q8_0).bytes();
        for (const auto& e : saccade::nn::named_linears(m.lm->module()))
          bytes += e.second->weight_q8_0.bytes();
        std::printf("quantized %lld matrices to q8_0 (%.1f MB of blocks)\n", static_cast<long long>(n),
                    static_cast<double>(bytes) / 1e6);
      }
      if (*sample) {
        if (prompts.empty())
          prompts.emplace_back(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        run_hf_samples(m, prompts, sopts, print_ids);
        return 0;
      }
      std::ifstream f(eval_data, std::ios::binary);
      const std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
      const ex::WindowScore s = ex::score_windows(*m.lm, m.tok->encode(text, false));
      std::printf("tokens %lld\nloss %.6f\nbits_per_byte %.6f\n", static_cast<long long>(s.tokens),
                  s.nats / static_cast<double>(s.tokens),
                  s.nats / std::log(2.0) / static_cast<double>(text.size()));
      return 0;
    }
#endif
    if (*sample) {
      std::shared_ptr<ex::GPT> model = ex::load_gpt(checkpoint, device);
      if (!attention_png.empty() && model->config().arch != "gpt2")
        throw cli::UsageError("--attention-png",
                              fmt::format("the {} model in '{}' keeps no attention weights "
                                          "(its attention is the fused kernel)",
                                          model->config().arch, checkpoint));
      const int64_t n_layer = model->config().n_layer;
      if (attention_layer < -n_layer || attention_layer >= n_layer)
        throw cli::UsageError(
            "--attention-layer",
            fmt::format("{} is not allowed (need an integer from {} to {}: the model has {} "
                        "blocks)",
                        attention_layer, -n_layer, n_layer - 1, n_layer));
      std::unique_ptr<ex::Tokenizer> tok = load_tokenizer(*model, checkpoint, tokenizer_file);
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
    const bool hf_init = !init_from_hf.empty();
    int64_t window = config.context;  // of the training windows
#ifdef SACCADE_HAVE_HF
    if (hf_init && train->get_option("--context")->count() == 0) window = hf_config->max_position_embeddings;
#endif
    require_usable_splits(data_dir, corpus, window);
    const std::string last_path = out_dir + "/last.safetensors";
    const bool resuming = topts.resume && std::filesystem::exists(last_path);
    if (tokenizer == "bpe" && !(topts.resume && std::filesystem::exists(ex::tokenizer_path(out_dir)))) {
      // SentencePiece needs a piece for each character of the stream besides its 259 (256 bytes, <unk>, <s>,
      // </s>): say so here rather than in its own words after the folder is made
      const int64_t least = distinct_characters(corpus.train) + 259;
      if (vocab_size < least)
        throw cli::UsageError("--vocab-size",
                              fmt::format("{} is not allowed (need an integer >= {} for this "
                                          "training stream: its {} characters and 259 pieces)",
                                          vocab_size, least, least - 259));
    }
    // The checkpoint --resume continues must hold the model this command builds: that is checked before
    // anything in --out changes (its tokenizer here, the whole config once the model is built).
    std::optional<ex::GPTConfig> saved;
    if (resuming) saved = saved_config(last_path);
    if (const std::string want = hf_init ? "hf" : tokenizer; saved && saved->tokenizer != want)
      throw different_model(last_path, *saved, want + " tokens");
#ifdef SACCADE_HAVE_HF
    std::shared_ptr<ex::GPT> pretrained;
    if (hf_init) {
      tokenizer = "hf";
      saccade::hf::LoadReport skipped;
      pretrained = ex::load_hf_gpt(init_from_hf, *hf_config, !non_strict, &skipped);
      report_skipped(skipped, init_from_hf);
      pretrained->train();
      if (train->get_option("--context")->count() > 0)  // windows shorter than the model's (checked above)
        pretrained = ex::crop_context(*pretrained, config.context);
      config = pretrained->config();
      std::printf("initialised from %s (%s)\n", init_from_hf.c_str(), hf_config->describe().c_str());
    }
#endif
    cli::OutputDir out("--out", out_dir);  // removed again if the run fails empty
    // one run at a time writes --out (rank 0 writes for all); released before `out` is cleaned up
    std::unique_ptr<ex::RunLock> lock = dist::is_main_process() ? lock_out(out_dir) : nullptr;
    // Ctrl-C: the run stops after its step, saved; a second one removes the files being written (and the
    // lock file) and quits
    std::vector<std::string> partial;
    for (const char* f : {"init.safetensors.tmp", "last.safetensors.tmp", "best.safetensors.tmp",
                          "log.csv.tmp", "tokenizer.model.input.txt", "tokenizer.model.tmp.model",
                          "tokenizer.model.tmp.vocab", ex::RunLock::kFileName})
      partial.push_back(out_dir + "/" + f);
    ex::InterruptGuard interrupt(
        "\ngpt: interrupted: stopping after this step, saved (--resume continues); interrupt again to quit "
        "at once\n",
        partial);
    topts.stop_requested = [] { return ex::InterruptGuard::requested(); };
    if (topts.resume && !resuming)
      std::printf("--resume: no checkpoint at %s: starting a fresh run\n", last_path.c_str());
    if (tokenizer == "bpe" && !(topts.resume && std::filesystem::exists(ex::tokenizer_path(out_dir)))) {
      if (dist::is_main_process()) {
        std::printf("training a SentencePiece BPE tokenizer of %lld pieces on the training stream -> %s\n",
                    static_cast<long long>(vocab_size), ex::tokenizer_path(out_dir).c_str());
        std::fflush(stdout);
        ex::SentencePieceTokenizer::train(corpus.train, vocab_size, ex::tokenizer_path(out_dir));
      }
      if (distributed) dist::barrier();
    }
    // an hf tokenizer is read from its folder here and copied beside the checkpoints once every check passed
    std::unique_ptr<ex::Tokenizer> tok = ex::make_tokenizer(tokenizer, hf_init ? init_from_hf : out_dir);
    if (tokenizer != "hf")
      config.vocab_size = tok->vocab_size();
    else if (tok->vocab_size() > config.vocab_size)
      throw cli::UsageError("--init-from-hf",
                            fmt::format("the tokenizer of '{}' has {} ids, the model {}", init_from_hf,
                                        tok->vocab_size(), config.vocab_size));
    config.tokenizer = tok->name();
    std::vector<int64_t> train_ids = tok->encode(corpus.train), valid_ids = tok->encode(corpus.valid);
    require_usable_splits(data_dir, corpus, config.context, static_cast<int64_t>(train_ids.size()),
                          static_cast<int64_t>(valid_ids.size()));
    // docs/data.md's bits per byte: a token stands for the stream's bytes over its tokens (exactly 1 for
    // bytes)
    topts.bytes_per_token = static_cast<double>(corpus.valid.size()) / static_cast<double>(valid_ids.size());
    std::printf("tokens: %s, vocabulary %lld; train %zu tokens, validation %zu tokens (%.3f bytes/token)\n",
                tok->name().c_str(), static_cast<long long>(tok->vocab_size()), train_ids.size(),
                valid_ids.size(), topts.bytes_per_token);
    auto model = std::make_shared<ex::GPT>(config, model_seed);
#ifdef SACCADE_HAVE_HF
    if (pretrained) model = pretrained;
#endif
    if (saved && saved->to_metadata() != model->config().to_metadata())
      throw different_model(last_path, *saved, model->config().describe());
#ifdef SACCADE_HAVE_HF
    if (hf_init) {  // beside the checkpoints, so that they load alone
      if (dist::is_main_process()) ex::copy_hf_tokenizer(init_from_hf, out_dir);
      if (distributed) dist::barrier();
    }
#endif
    model->to(device);
    for (auto& block : model->h) block->checkpoint_activations = checkpoint_activations;
    for (auto& layer : model->layers) layer->checkpoint_activations = checkpoint_activations;
    std::printf("%s, %lld parameters\n", config.describe().c_str(),
                static_cast<long long>(model->num_parameters()));
    topts.seed = model_seed;
    topts.device = device;
    topts.out_dir = out_dir;
    topts.distributed = distributed;
    topts.dtype = cli::dtype(dtype_name);
    std::printf("forward in %s%s\n", std::string(saccade::dtype_name(topts.dtype)).c_str(),
                topts.dtype == saccade::DType::Float32 ? "" : " (autocast; float32 weights and optimizer)");
    std::fflush(stdout);
    ex::GPTTrainResult r = ex::train_gpt(*model, train_ids, valid_ids, topts);
    constexpr int kInterruptedExit = 130;  // 128 + SIGINT, as a shell reports a command Ctrl-C ended
    if (!dist::is_main_process()) return r.interrupted ? kInterruptedExit : 0;
    const double train_bytes_per_token =
        static_cast<double>(corpus.train.size()) / static_cast<double>(train_ids.size());
    if (r.interrupted) {  // the steps done are saved; no final score, no sample
      if (r.steps_done > 0)
        std::printf(
            "interrupted: trained steps %lld-%lld in %.1f s, saved in %s/last.safetensors and log.csv "
            "(--resume continues)\n",
            static_cast<long long>(r.start_step + 1), static_cast<long long>(r.start_step + r.steps_done),
            r.seconds, out_dir.c_str());
      else
        std::printf("interrupted before the first step: nothing trained\n");
      if (!r.log.empty()) {
        write_loss_plot(out_dir + "/loss.png", r.log, train_bytes_per_token);
        std::printf("outputs in %s: last.safetensors (to --resume), log.csv (each step)%s\n", out_dir.c_str(),
                    ex::plots_available() ? ", loss.png" : "");
      }
      return kInterruptedExit;
    }
    const int64_t end_step = r.start_step + r.steps_done;
    if (r.steps_done > 0) {
      std::printf(
          "trained steps %lld-%lld in %.1f s (%.1f s with scoring and saving; %.2f steps/s, %.0f tokens/s): "
          "%s\n",
          static_cast<long long>(r.start_step + 1), static_cast<long long>(end_step), r.seconds,
          r.wall_seconds, r.steps_done / r.seconds, r.tokens_per_second, why_ended(topts, end_step).c_str());
      std::printf(
          "final training loss %.4f nats/token: the mean of the last %lld steps (the progress line's loss is "
          "a "
          "running average; log.csv has each step's)\n",
          r.final_loss, static_cast<long long>(std::min<int64_t>(r.steps_done, 50)));
      write_loss_plot(out_dir + "/loss.png", r.log, train_bytes_per_token);
    } else {
      std::printf("the checkpoint is at step %lld, %s: nothing to train; scoring %s/best.safetensors\n",
                  static_cast<long long>(r.start_step), why_ended(topts, r.start_step).c_str(),
                  out_dir.c_str());
    }
    std::printf(
        "outputs in %s: last.safetensors (to --resume), best.safetensors (the best validation score), "
        "log.csv (each step)%s\n",
        out_dir.c_str(), ex::plots_available() && !r.log.empty() ? ", loss.png" : "");
    std::shared_ptr<ex::GPT> best = ex::load_gpt(out_dir + "/best.safetensors", device);
    ex::LMScore s = ex::evaluate_lm(*best, valid_ids, topts.bytes_per_token);
    std::printf("best model on the whole validation stream: %.4f nats/token, %.4f bits/byte (%lld tokens)\n",
                s.nats_per_token, s.bits_per_byte, static_cast<long long>(s.tokens));
#ifdef SACCADE_HAVE_HF
    if (!save_hf.empty()) {
      const auto* hf_tok = dynamic_cast<const ex::HFTokenizer*>(tok.get());
      ex::save_hf_gpt(*best, save_hf, saccade::DType::Float32, hf_tok ? hf_tok->eos_id() : -1,
                      hf_config ? &*hf_config : nullptr, hf_tok ? hf_tok->bos_id() : -1);
      if (hf_tok)
        ex::copy_hf_tokenizer(out_dir, save_hf);
      else
        ex::write_byte_tokenizer_json(save_hf + "/tokenizer.json");
      std::printf(
          "wrote %s: the best model in the Hugging Face layout (config.json, model.safetensors, "
          "tokenizer)\n",
          save_hf.c_str());
    }
#endif
    if (sample_tokens > 0) {
      train_sopts.max_new_tokens = sample_tokens;
      run_samples(*best, *tok, {"\n%\n"}, train_sopts, 1);
    }
  } catch (const std::exception& e) {
    if (distributed && dist::world_size() > 1)
      dist::world().abort(fmt::format("gpt: rank {}: {}", dist::rank(), e.what()));
    return cli::report("gpt", e);
  }
  return 0;
}
