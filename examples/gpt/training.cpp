#include "examples/gpt/training.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "distributed/data_parallel.h"
#include "distributed/rank_zero.h"
#include "distributed/sampler.h"
#include "examples/common/progress.h"
#include "examples/gpt/data.h"
#include "nn/optim.h"
#include "nn/scheduler.h"
#include "ops/creation.h"
#include "ops/error.h"

namespace saccade::examples {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t metadata_u64(const nn::Metadata& m, const std::string& key) {
  auto it = m.find(key);
  SACCADE_CHECK(it != m.end(), "train_gpt: the checkpoint has no \"{}\"", key);
  return std::stoull(it->second);
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

GPTTrainResult train_gpt(GPT& model, const std::vector<int64_t>& train, const std::vector<int64_t>& valid,
                         const GPTTrainOptions& o) {
  SACCADE_CHECK(
      o.steps >= 1 && o.batch_size >= 1 && o.grad_accum >= 1 && o.batch_size % o.grad_accum == 0 &&
          o.lr > 0 && o.min_lr >= 0 && o.warmup >= 0 && o.eval_every >= 0,
      "train_gpt: need steps >= 1, batch_size a positive multiple of grad_accum, lr > 0, min_lr >= 0, "
      "warmup >= 0 and eval_every >= 0, got steps {}, batch_size {}, grad_accum {}, lr {}, min_lr "
      "{}, warmup {}, eval_every {}",
      o.steps, o.batch_size, o.grad_accum, o.lr, o.min_lr, o.warmup, o.eval_every);
  const int64_t T = model.config().context, micro = o.batch_size / o.grad_accum;
  const int world = o.distributed ? distributed::world_size() : 1;
  SACCADE_CHECK(micro >= world, "train_gpt: a micro-batch of {} windows cannot be split over {} ranks", micro,
                world);
  nn::AdamW adamw({nn::ParamGroup{model.decayed_parameters(), std::nullopt, o.weight_decay},
                   nn::ParamGroup{model.undecayed_parameters(), std::nullopt, 0.0}},
                  nn::AdamOptions{.lr = o.lr, .beta2 = o.beta2, .weight_decay = o.weight_decay});
  const int64_t warmup = std::min(o.warmup, o.steps - 1);
  nn::LinearWarmup schedule(adamw, warmup, 0.1, std::max<int64_t>(o.steps - warmup, 1), o.min_lr);
  std::vector<Variable> params = model.parameters();

  const std::string last_path = o.out_dir.empty() ? "" : o.out_dir + "/last.safetensors";
  const std::string best_path = o.out_dir.empty() ? "" : o.out_dir + "/best.safetensors";
  if (!o.out_dir.empty()) std::filesystem::create_directories(o.out_dir);
  GPTTrainResult r;
  r.best.bits_per_byte = INFINITY;
  uint64_t windows = 0;
  const uint64_t seed = model.generator().seed();
  if (o.resume && !last_path.empty() && std::filesystem::exists(last_path)) {
    GPTConfig saved = GPTConfig::from_metadata(nn::load_safetensors(last_path).metadata);
    SACCADE_CHECK(saved.to_metadata() == model.config().to_metadata(),
                  "train_gpt: {} holds a different model ({}) than this one ({})", last_path,
                  saved.describe(), model.config().describe());
    nn::CheckpointInfo info = nn::load_checkpoint(last_path, model, adamw);
    r.start_step = info.step;
    windows = metadata_u64(info.metadata, "windows");
    Generator g(metadata_u64(info.metadata, "dropout_seed"));
    g.advance(metadata_u64(info.metadata, "dropout_offset"));
    model.generator() = g;
    r.best.bits_per_byte = std::stod(info.metadata.at("best_bits_per_byte"));
    schedule.set_last_epoch(info.step);
    if (o.log) distributed::print(o.log, "resumed from {} at step {}\n", last_path, info.step);
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
    distributed::save_checkpoint(path, model, adamw, step, meta);
  };
  auto score = [&](int64_t step) {
    LMScore s;
    if (distributed::is_main_process()) s = evaluate_lm(model, valid, o.bytes_per_token, o.eval_tokens);
    if (o.distributed) s.bits_per_byte = mean_over_ranks(s.bits_per_byte) * world;  // rank 0's figure
    r.val_steps.push_back(static_cast<double>(step));
    r.val_bits_per_byte.push_back(s.bits_per_byte);
    if (o.log)
      distributed::print(o.log, "step {}: validation {:.4f} nats/token, {:.4f} bits/byte ({} tokens)\n", step,
                         s.nats_per_token, s.bits_per_byte, s.tokens);
    if (s.bits_per_byte < r.best.bits_per_byte) {
      r.best = s;
      save(best_path, step);
    }
  };

  const int64_t last = o.stop_at > 0 ? std::min(o.stop_at, o.steps) : o.steps;
  const int64_t todo = last - r.start_step;
  if (todo <= 0) return r;
  model.train();
  ProgressBar bar(todo, o.print_every, o.log ? o.log : stdout, o.log ? -1 : 0);
  double ema = 0;
  const auto start = Clock::now();
  for (int64_t step = r.start_step + 1; step <= last; ++step) {
    adamw.zero_grad();
    double loss_value = 0;
    for (int64_t m = 0; m < o.grad_accum; ++m) {
      Batch b = random_windows(train, micro, T, rng);  // every rank draws the whole micro-batch
      windows += static_cast<uint64_t>(micro);
      Tensor x = b.x.narrow(0, mine.begin, mine.end - mine.begin).contiguous().to(o.device);
      Tensor y = b.y.narrow(0, mine.begin, mine.end - mine.begin).contiguous().reshape({-1}).to(o.device);
      Variable logits = model.forward(x);
      Variable loss = cross_entropy(reshape(logits, {x.numel(), -1}), y) / static_cast<double>(o.grad_accum);
      loss_value += loss.item<double>();
      if (ddp && m + 1 < o.grad_accum) {
        auto guard = ddp->no_sync();
        loss.backward();
      } else {
        loss.backward();
      }
    }
    if (ddp) {
      ddp->synchronize();
      loss_value = mean_over_ranks(loss_value);
    }
    nn::clip_grad_norm_(params, o.clip);
    adamw.step();
    schedule.step();
    ema = step == r.start_step + 1 ? loss_value : 0.95 * ema + 0.05 * loss_value;
    r.loss_steps.push_back(static_cast<double>(step));
    r.losses.push_back(loss_value);
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    const double tps = static_cast<double>((step - r.start_step) * o.batch_size * T) / secs;
    if (o.log && distributed::is_main_process())
      bar.update(step - r.start_step, ema, fmt::format("{:.0f} tokens/s", tps));
    const bool at_eval = (o.eval_every > 0 && step % o.eval_every == 0) || step == last;
    if (at_eval) {
      if (o.log && distributed::is_main_process()) bar.finish();
      score(step);
      save(last_path, step);
      model.train();
    }
  }
  r.steps_done = todo;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.tokens_per_second = static_cast<double>(todo * o.batch_size * T) / r.seconds;
  const size_t n = std::min<size_t>(r.losses.size(), 50);
  for (size_t i = r.losses.size() - n; i < r.losses.size(); ++i) r.final_loss += r.losses[i] / n;
  return r;
}

std::shared_ptr<GPT> load_gpt(const std::string& path, Device device) {
  nn::Safetensors file = nn::load_safetensors(path);
  auto model = std::make_shared<GPT>(GPTConfig::from_metadata(file.metadata));
  model->to(device);
  nn::load(*model, path);
  return model;
}

}  // namespace saccade::examples
