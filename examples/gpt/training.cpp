#include "examples/gpt/training.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <optional>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "distributed/data_parallel.h"
#include "distributed/rank_zero.h"
#include "distributed/sampler.h"
#include "examples/common/progress.h"
#include "examples/common/step_profiler.h"
#include "examples/gpt/data.h"
#include "examples/gpt/tokenizer.h"
#include "nn/grad_scaler.h"
#include "nn/optim.h"
#include "ops/creation.h"
#include "core/error.h"

namespace saccade::examples {
namespace {

using Clock = std::chrono::steady_clock;

// A checkpoint's metadata value as a number: the whole string must parse (from_chars), else saccade::Error
// naming the file and the key.
template <class T>
T metadata_number(const nn::Metadata& m, const std::string& path, const std::string& key) {
  auto it = m.find(key);
  SACCADE_CHECK(it != m.end(), "resume_gpt: '{}': the checkpoint has no \"{}\"", path, key);
  const std::string& s = it->second;
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  SACCADE_CHECK(ec == std::errc() && end == s.data() + s.size(),
                "resume_gpt: '{}': \"{}\" is '{}', not a number", path, key, s);
  return v;
}

// The config in a checkpoint's metadata; its errors name `who` and the file.
GPTConfig config_of(const nn::Safetensors& file, const std::string& path, const char* who) {
  try {
    return GPTConfig::from_metadata(file.metadata);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: '{}': {}", who, path, e.what()));
  }
}

double mean_over_ranks(double value) {
  Tensor t = ops::full({1}, value, DType::Float64);
  distributed::world().allreduce_sum(t)->wait(distributed::default_timeout(), "train_gpt: loss");
  return t.item<double>() / distributed::world_size();
}

}  // namespace

LMScore evaluate_lm(GPT& model, const std::vector<int64_t>& tokens, double bytes_per_token,
                    int64_t max_tokens, int64_t batch) {
  const int64_t N = static_cast<int64_t>(tokens.size()), T = model.config().context;
  SACCADE_CHECK(N >= 2 && batch >= 1,
                "evaluate_lm: need a stream of 2 tokens or more and batch >= 1, got {}, {}", N, batch);
  const int64_t limit = max_tokens < 0 ? N - 1 : std::min(max_tokens, N - 1);
  std::vector<int64_t> starts = eval_window_starts(limit + 1, T);
  // At most kMaxLogits logits a batch: GPT-2 124M's (1024, 50257) logits of one window take 206 MB in
  // float32, and 16 windows with the loss's intermediates held 9 GB. The score does not depend on the batch.
  constexpr int64_t kMaxLogits = int64_t{1} << 26;
  batch = std::clamp<int64_t>(kMaxLogits / std::max<int64_t>(T * model.config().vocab_size, 1), 1, batch);
  const Device device = model.wte->weight.device();
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  double nats = 0;
  LMScore s;
  for (size_t i = 0; i < starts.size();) {
    const int64_t len = std::min(T, limit - starts[i]);  // windows of one length go together
    size_t j = i;
    while (j < starts.size() && j - i < static_cast<size_t>(batch) && std::min(T, limit - starts[j]) == len)
      ++j;
    const int64_t B = static_cast<int64_t>(j - i);
    Tensor x = ops::empty({B, len}, DType::Int64), y = ops::empty({B * len}, DType::Int64);
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(tokens.begin() + starts[i + b], len, x.data<int64_t>() + b * len);
      std::copy_n(tokens.begin() + starts[i + b] + 1, len, y.data<int64_t>() + b * len);
    }
    Variable logits = model.forward(x.to(device));
    Variable loss = cross_entropy(reshape(logits, {B * len, -1}), y.to(device), -100, Reduction::Sum);
    nats += loss.item<double>();
    s.tokens += B * len;
    i = j;
  }
  model.train(was_training);
  s.nats_per_token = nats / static_cast<double>(s.tokens);
  s.bits_per_byte = nats / std::log(2.0) / (static_cast<double>(s.tokens) * bytes_per_token);
  return s;
}

double scheduled_lr(const GPTTrainOptions& o, int64_t step, double seconds, double warmup_end) {
  const int64_t W = std::min(o.warmup, o.steps - 1), epoch = step - 1;
  if (epoch < W) return o.lr * (0.1 + 0.9 * static_cast<double>(epoch) / static_cast<double>(W));
  double q = o.time_limit > 0
                 ? (seconds - warmup_end) / std::max(o.time_limit - warmup_end, 1e-9)
                 : static_cast<double>(epoch - W) / static_cast<double>(std::max<int64_t>(o.steps - W, 1));
  q = std::clamp(q, 0.0, 1.0);
  return o.min_lr + (o.lr - o.min_lr) * (1 + std::cos(std::numbers::pi * q)) / 2;
}

void write_train_log(const std::string& path, const std::vector<TrainLogRow>& rows) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << "step,seconds,lr,train_loss,val_bits_per_byte\n";
    for (const TrainLogRow& r : rows) {
      out << fmt::format("{},{:.3f},{:.6g},{:.6f},", r.step, r.seconds, r.lr, r.train_loss);
      if (!std::isnan(r.val_bits_per_byte)) out << fmt::format("{:.6f}", r.val_bits_per_byte);
      out << '\n';
    }
    out.flush();
    SACCADE_CHECK(out.good(), "write_train_log: cannot write {}", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  SACCADE_CHECK(!ec, "write_train_log: cannot rename {} to {}: {}", tmp, path, ec.message());
}

std::vector<TrainLogRow> read_train_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SACCADE_CHECK(in.good(), "read_train_log: cannot read {}", path);
  std::string line;
  std::getline(in, line);
  SACCADE_CHECK(
      line == "step,seconds,lr,train_loss,val_bits_per_byte",
      "read_train_log: {} line 1 is not the header \"step,seconds,lr,train_loss,val_bits_per_byte\"", path);
  std::vector<TrainLogRow> rows;
  for (int64_t n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string field; std::getline(ss, field, ',');) f.push_back(field);
    if (line.back() == ',') f.emplace_back();
    TrainLogRow r;
    try {
      SACCADE_CHECK(f.size() == 5, "");
      size_t used = 0;
      r.step = std::stoll(f[0], &used);
      SACCADE_CHECK(used == f[0].size(), "");
      r.seconds = std::stod(f[1]), r.lr = std::stod(f[2]), r.train_loss = std::stod(f[3]);
      r.val_bits_per_byte = f[4].empty() ? NAN : std::stod(f[4]);
    } catch (const std::exception&) {
      SACCADE_CHECK(false,
                    "read_train_log: {} line {} is not \"step,seconds,lr,train_loss,val_bits_per_byte\": {}",
                    path, n, line);
    }
    rows.push_back(r);
  }
  return rows;
}

GPTResumeState resume_gpt(const std::string& path, GPT& model, nn::Optimizer& optimizer, int64_t batch_size,
                          nn::GradScaler* scaler) {
  const nn::Safetensors file = nn::load_safetensors(path);
  const GPTConfig saved = config_of(file, path, "resume_gpt");
  SACCADE_CHECK(saved.to_metadata() == model.config().to_metadata(),
                "resume_gpt: '{}' holds a different model ({}) than this one ({})", path, saved.describe(),
                model.config().describe());
  // Everything is parsed and checked before the model, optimizer or generator change.
  GPTResumeState st;
  st.step = metadata_number<int64_t>(file.metadata, path, "step");
  st.windows = metadata_number<uint64_t>(file.metadata, path, "windows");
  SACCADE_CHECK(
      batch_size >= 1 && st.step >= 0 && static_cast<uint64_t>(st.step) <= UINT64_MAX / batch_size &&
          st.windows == static_cast<uint64_t>(st.step) * static_cast<uint64_t>(batch_size),
      "resume_gpt: '{}': \"windows\" is {}, not step {} x batch_size {} (resume with the checkpoint's "
      "batch size)",
      path, st.windows, st.step, batch_size);
  st.dropout_seed = metadata_number<uint64_t>(file.metadata, path, "dropout_seed");
  st.dropout_offset = metadata_number<uint64_t>(file.metadata, path, "dropout_offset");
  st.best_bits_per_byte = metadata_number<double>(file.metadata, path, "best_bits_per_byte");
  // checkpoints of earlier versions have no training clock: 0
  for (auto [key, out] : {std::pair{"train_seconds", &st.train_seconds},
                          std::pair{"warmup_end_seconds", &st.warmup_end_seconds}})
    *out = file.metadata.count(key) ? metadata_number<double>(file.metadata, path, key) : 0.0;
  nn::load_checkpoint(path, model, optimizer, scaler);
  Generator g(st.dropout_seed);
  g.advance(st.dropout_offset);
  model.generator() = g;
  return st;
}

GPTTrainResult train_gpt(GPT& model, const std::vector<int64_t>& train, const std::vector<int64_t>& valid,
                         const GPTTrainOptions& o) {
  SACCADE_CHECK(
      o.steps >= 1 && o.batch_size >= 1 && o.grad_accum >= 1 && o.batch_size % o.grad_accum == 0 &&
          o.lr > 0 && o.min_lr >= 0 && o.warmup >= 0 && o.eval_every >= 0 && o.time_limit >= 0,
      "train_gpt: need steps >= 1, batch_size a positive multiple of grad_accum, lr > 0, min_lr >= 0, "
      "warmup >= 0, eval_every >= 0 and time_limit >= 0, got steps {}, batch_size {}, grad_accum {}, lr {}, "
      "min_lr {}, warmup {}, eval_every {}, time_limit {}",
      o.steps, o.batch_size, o.grad_accum, o.lr, o.min_lr, o.warmup, o.eval_every, o.time_limit);
  const int64_t T = model.config().context, micro = o.batch_size / o.grad_accum;
  const int world = o.distributed ? distributed::world_size() : 1;
  SACCADE_CHECK(micro >= world, "train_gpt: a micro-batch of {} windows cannot be split over {} ranks", micro,
                world);
  nn::AdamW adamw({nn::ParamGroup{model.decayed_parameters(), std::nullopt, o.weight_decay},
                   nn::ParamGroup{model.undecayed_parameters(), std::nullopt, 0.0}},
                  nn::AdamOptions{.lr = o.lr, .beta2 = o.beta2, .weight_decay = o.weight_decay});
  std::vector<Variable> params = model.parameters();
  SACCADE_CHECK(o.dtype == DType::Float32 || o.dtype == DType::BFloat16 || o.dtype == DType::Float16,
                "train_gpt: dtype must be float32, bfloat16 or float16, got {}", o.dtype);
  // float16's gradients underflow without loss scaling; bfloat16 has float32's range and needs none
  std::optional<nn::GradScaler> scaler;
  if (o.dtype == DType::Float16) scaler.emplace(nn::GradScalerOptions{.device = o.device});
  nn::GradScaler* scaler_ptr = scaler ? &*scaler : nullptr;

  const std::string dir = o.out_dir.empty() ? "" : o.out_dir + "/";
  const std::string last_path = dir.empty() ? "" : dir + "last.safetensors";
  const std::string best_path = dir.empty() ? "" : dir + "best.safetensors";
  const std::string log_path = dir.empty() ? "" : dir + "log.csv";
  if (!o.out_dir.empty()) std::filesystem::create_directories(o.out_dir);
  GPTTrainResult r;
  r.best.bits_per_byte = INFINITY;
  uint64_t windows = 0;
  double trained = 0, warmup_end = 0;  // training seconds so far; at the first cosine step
  const uint64_t seed = model.generator().seed();
  const bool resuming = o.resume && !last_path.empty() && std::filesystem::exists(last_path);
  if (resuming) {
    GPTResumeState state = resume_gpt(last_path, model, adamw, o.batch_size, scaler_ptr);
    r.start_step = state.step;
    windows = state.windows;
    r.best.bits_per_byte = state.best_bits_per_byte;
    trained = state.train_seconds;
    warmup_end = state.warmup_end_seconds;
    if (std::filesystem::exists(log_path))  // the rows up to the checkpoint: the earlier sessions' curve
      for (const TrainLogRow& row : read_train_log(log_path))
        if (row.step <= state.step) r.log.push_back(row);
    if (o.log) distributed::print(o.log, "resumed from {} at step {}\n", last_path, state.step);
  } else if (!dir.empty() && distributed::is_main_process()) {
    nn::save(model, dir + "init.safetensors", model.config().to_metadata());
  }
  std::mt19937_64 rng(o.seed);
  rng.discard(windows);
  std::optional<distributed::DistributedDataParallel> ddp;
  if (o.distributed) ddp.emplace(model);
  const distributed::Range mine =
      distributed::shard_range(micro, o.distributed ? distributed::rank() : 0, world);

  auto save = [&](const std::string& path, int64_t step) {
    if (path.empty()) return;
    nn::Metadata meta = model.config().to_metadata();
    meta["windows"] = std::to_string(windows);
    meta["dropout_seed"] = std::to_string(seed);
    meta["dropout_offset"] = std::to_string(model.generator().offset());
    meta["best_bits_per_byte"] = fmt::format("{}", r.best.bits_per_byte);
    meta["window_seed"] = std::to_string(o.seed);
    meta["train_seconds"] = fmt::format("{}", trained);
    meta["warmup_end_seconds"] = fmt::format("{}", warmup_end);
    meta["dtype"] = std::string(dtype_name(o.dtype));  // of the training forward; the weights are float32
    distributed::save_checkpoint(path, model, adamw, step, meta, scaler_ptr);
  };
  auto score = [&](int64_t step) {
    LMScore s;
    if (distributed::is_main_process()) s = evaluate_lm(model, valid, o.bytes_per_token, o.eval_tokens);
    if (o.distributed) s.bits_per_byte = mean_over_ranks(s.bits_per_byte) * world;  // rank 0's figure
    r.log.back().val_bits_per_byte = s.bits_per_byte;
    if (o.log)
      distributed::print(o.log, "step {}: validation {:.4f} nats/token, {:.4f} bits/byte ({} tokens)\n", step,
                         s.nats_per_token, s.bits_per_byte, s.tokens);
    if (s.bits_per_byte < r.best.bits_per_byte) {
      r.best = s;
      save(best_path, step);
    }
  };

  const int64_t last = o.stop_at > 0 ? std::min(o.stop_at, o.steps) : o.steps;
  if (last <= r.start_step || (o.time_limit > 0 && trained >= o.time_limit)) return r;
  // every rank stops at the same step: the first that is asked to decides
  auto any_rank = [&](bool mine) { return o.distributed ? mean_over_ranks(mine ? 1.0 : 0.0) > 0 : mine; };
  if (o.stop_requested && any_rank(o.stop_requested())) {
    r.interrupted = true;
    return r;
  }
  model.train();
  ProgressBar bar(last, o.print_every, o.log ? o.log : stdout, o.log ? -1 : 0, r.start_step);
  bar.set_loss_label("avg loss");  // a running average (0.95 per step) of the steps' losses
  if (o.time_limit > 0) bar.set_time_limit(o.time_limit);
  StepProfiler profile(distributed::is_main_process() ? o.profile_trace : "", 1, 3, o.log);
  double ema = 0;
  const auto start = Clock::now();
  const double trained_before = trained;
  int64_t step = r.start_step + 1;
  for (;; ++step) {
    profile.step();
    const auto step_start = Clock::now();
    if (step == std::min(o.warmup, o.steps - 1) + 1) warmup_end = trained;
    const double lr = scheduled_lr(o, step, trained, warmup_end);
    for (size_t g = 0; g < adamw.num_groups(); ++g) adamw.set_lr(g, lr);
    adamw.zero_grad();
    double loss_value = 0;
    for (int64_t m = 0; m < o.grad_accum; ++m) {
      Batch b = random_windows(train, micro, T, rng);  // every rank draws the whole micro-batch
      windows += static_cast<uint64_t>(micro);
      Tensor x = b.x.narrow(0, mine.begin, mine.end - mine.begin).contiguous().to(o.device);
      Tensor y = b.y.narrow(0, mine.begin, mine.end - mine.begin).contiguous().reshape({-1}).to(o.device);
      Variable loss;
      {
        // the forward and the loss in 16 bits where the policy says so (autograd/autocast.h)
        std::optional<AutocastGuard> autocast;
        if (o.dtype != DType::Float32) autocast.emplace(o.dtype);
        Variable logits = model.forward(x);
        loss = cross_entropy(reshape(logits, {x.numel(), -1}), y) / static_cast<double>(o.grad_accum);
      }
      loss_value += loss.item<double>();
      Variable scaled = scaler ? scaler->scale(loss) : loss;
      if (ddp && m + 1 < o.grad_accum) {
        auto guard = ddp->no_sync();
        scaled.backward();
      } else {
        scaled.backward();
      }
    }
    if (ddp) {
      ddp->synchronize();
      loss_value = mean_over_ranks(loss_value);
    }
    if (scaler) scaler->unscale_(adamw);  // clipping needs the true gradients
    nn::clip_grad_norm_(params, o.clip);
    if (scaler) {
      scaler->step(adamw);  // skipped when a gradient overflowed float16
      scaler->update();
    } else {
      adamw.step();
    }
    trained += std::chrono::duration<double>(Clock::now() - step_start).count();
    // every rank stops at the same step: the first whose clock reaches the limit decides
    const bool out_of_time = o.time_limit > 0 && any_rank(trained >= o.time_limit);
    const bool asked_to_stop = o.stop_requested && any_rank(o.stop_requested());
    const bool interrupted = asked_to_stop && step != last && !out_of_time;  // else it ends anyway
    ema = step == r.start_step + 1 ? loss_value : 0.95 * ema + 0.05 * loss_value;
    r.log.push_back(TrainLogRow{step, trained, lr, loss_value, NAN});
    const double tps =
        static_cast<double>((step - r.start_step) * o.batch_size * T) / (trained - trained_before);
    bar.set_train_seconds(trained - trained_before);  // the summary's clock: validation left out
    if (o.log && distributed::is_main_process())
      bar.update(step, ema,
                 o.time_limit > 0
                     ? fmt::format("{:.0f} tokens/s, {:.1f} of {:g} s", tps, trained, o.time_limit)
                     : fmt::format("{:.0f} tokens/s", tps),
                 o.time_limit > 0 ? (out_of_time ? 0.0 : std::max(o.time_limit - trained, 0.0)) : -1.0);
    const bool at_eval =
        (o.eval_every > 0 && step % o.eval_every == 0) || step == last || out_of_time || interrupted;
    profile.end_step(at_eval);  // the profile holds training steps only, never the validation
    if (at_eval) {
      if (o.log && distributed::is_main_process()) bar.finish();
      if (!interrupted) score(step);  // an interrupted run stops now; its steps are saved, not scored
      save(last_path, step);
      if (!log_path.empty() && distributed::is_main_process()) write_train_log(log_path, r.log);
      model.train();
    }
    if (step == last || out_of_time || interrupted) {
      r.interrupted = interrupted;
      break;
    }
  }
  profile.finish();
  r.steps_done = step - r.start_step;
  r.seconds = trained - trained_before;
  r.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.tokens_per_second = static_cast<double>(r.steps_done * o.batch_size * T) / r.seconds;
  const size_t n = std::min<size_t>(static_cast<size_t>(r.steps_done), 50);
  for (size_t i = r.log.size() - n; i < r.log.size(); ++i) r.final_loss += r.log[i].train_loss / n;
  return r;
}

void export_gpt(const std::string& from, const std::string& to, DType dtype) {
  std::shared_ptr<GPT> model = load_gpt(from);
  nn::StateDict rounded;
  for (const auto& [name, t] : model->state_dict())
    rounded.insert(name, is_floating(t.dtype()) ? t.to(dtype) : t);
  nn::Metadata meta = model->config().to_metadata();
  meta["dtype"] = std::string(dtype_name(dtype));
  meta["format"] = "pt";
  nn::save_safetensors(rounded, to, meta);
}

std::shared_ptr<GPT> load_gpt(const std::string& path, Device device) {
  const nn::Safetensors file = nn::load_safetensors(path);
  const GPTConfig config = config_of(file, path, "load_gpt");
  SACCADE_CHECK(is_known_tokenizer(config.tokenizer),
                "load_gpt: '{}': its \"tokenizer\" is '{}', which make_tokenizer does not know (byte, bpe)",
                path, config.tokenizer);
  // The model is built before its weights load: its size must be what the file holds, or a 1 kB file
  // could ask for a model of terabytes.
  int64_t held = 0;
  for (const auto& [name, t] : file.tensors)  // a training checkpoint also holds the optimizer and the scaler
    if (name.rfind("optimizer.", 0) != 0 && name.rfind("scaler.", 0) != 0) held += t.numel();
  SACCADE_CHECK(config.num_parameters() == held,
                "load_gpt: '{}': its config ({}) needs {} parameters, its tensors hold {}", path,
                config.describe(), config.num_parameters(), held);
  auto model = std::make_shared<GPT>(config);
  model->to(device);
  nn::load(*model, path);
  return model;
}

}  // namespace saccade::examples
