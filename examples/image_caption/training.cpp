#include "examples/image_caption/training.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "distributed/data_parallel.h"
#include "distributed/rank_zero.h"
#include "distributed/sampler.h"
#include "examples/common/metrics.h"
#include "examples/common/plots.h"
#include "examples/common/png_io.h"
#include "examples/common/progress.h"
#include "examples/common/step_profiler.h"
#include "nn/grad_scaler.h"
#include "nn/optim.h"
#include "nn/scheduler.h"
#include "ops/creation.h"
#include "core/error.h"

namespace saccade::examples {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int64_t metadata_int(const nn::Metadata& m, const std::string& key, int64_t fallback) {
  auto it = m.find(key);
  return it == m.end() ? fallback : std::stoll(it->second);
}

// Wall time spent in each phase of a training step (--phase-times).
struct PhaseTimes {
  double data = 0, encode = 0, decode = 0, backward = 0, optimizer = 0;
  void print(std::FILE* out, int64_t steps) const {
    double total = data + encode + decode + backward + optimizer;
    auto row = [&](const char* name, double t) {
      std::fprintf(out, "  %-10s %8.2f ms/step  %5.1f%%\n", name, 1e3 * t / steps, 100 * t / total);
    };
    std::fprintf(out, "time per step (%lld steps):\n", static_cast<long long>(steps));
    row("data", data), row("encode", encode), row("decode+loss", decode), row("backward", backward),
        row("clip+adam", optimizer);
  }
};

// Rank `mine` of a global batch of `global` scenes: every rank draws the whole batch from the one stream
// (cheap: a few random integers per scene) and renders only its share.
SceneBatch next_shard(SceneGenerator& generator, const ImageSet& source, int64_t global,
                      distributed::Range mine) {
  std::vector<Scene> scenes;
  for (int64_t i = 0; i < global; ++i) {
    Scene s = generator.next_scene();
    if (i >= mine.begin && i < mine.end) scenes.push_back(std::move(s));
  }
  return render_scenes(source, scenes);
}

double mean_over_ranks(double value) {
  Tensor t = ops::full({1}, value, DType::Float64);
  distributed::world().allreduce_sum(t)->wait(distributed::default_timeout(), "train_captioner: loss");
  return t.item<double>() / distributed::world_size();
}

}  // namespace

TrainResult train_captioner(Captioner& model, const ImageSet& train_set, const TrainOptions& opts) {
  SACCADE_CHECK(opts.steps >= 1 && opts.batch_size >= 1 && opts.lr > 0 && opts.warmup >= 0,
                "train_captioner: need steps, batch_size, lr > 0 and warmup >= 0, got {}, {}, {}, {}",
                opts.steps, opts.batch_size, opts.lr, opts.warmup);
  const int64_t V = Vocab().size();
  std::vector<Variable> params = model.parameters();
  nn::Adam adam(params, nn::AdamOptions{.lr = opts.lr});
  const int64_t warmup = std::min(opts.warmup, opts.steps - 1);
  nn::LinearWarmup schedule(adam, warmup, 0.1, std::max<int64_t>(opts.steps - warmup, 1), opts.lr / 20);

  SACCADE_CHECK(opts.dtype == DType::Float32 || opts.dtype == DType::BFloat16 || opts.dtype == DType::Float16,
                "train_captioner: dtype must be float32, bfloat16 or float16, got {}", opts.dtype);
  std::optional<nn::GradScaler> scaler;  // float16 only: bfloat16 has float32's range
  if (opts.dtype == DType::Float16) scaler.emplace(nn::GradScalerOptions{.device = opts.device});
  nn::GradScaler* scaler_ptr = scaler ? &*scaler : nullptr;

  TrainResult result;
  int64_t scenes_drawn = 0;
  if (opts.resume && !opts.checkpoint.empty() && std::filesystem::exists(opts.checkpoint)) {
    nn::CheckpointInfo info = nn::load_checkpoint(opts.checkpoint, model, adam, scaler_ptr);
    result.start_step = info.step;
    scenes_drawn = metadata_int(info.metadata, "scenes_drawn", info.step * opts.batch_size);
    schedule.set_last_epoch(info.step);
    if (opts.log)
      std::fprintf(opts.log, "resumed from %s at step %lld\n", opts.checkpoint.c_str(),
                   static_cast<long long>(info.step));
  }
  // Data parallel: after the checkpoint was loaded (every rank loads the same file; the constructor's
  // broadcast from rank 0 makes the replicas identical in any case).
  std::optional<distributed::DistributedDataParallel> ddp;
  const int world = opts.distributed ? distributed::world_size() : 1;
  SACCADE_CHECK(opts.batch_size >= world,
                "train_captioner: a global batch of {} cannot be split over {} ranks", opts.batch_size,
                world);
  const distributed::Range mine =
      distributed::shard_range(opts.batch_size, opts.distributed ? distributed::rank() : 0, world);
  if (opts.distributed) ddp.emplace(model);

  // The scene stream continues where the checkpointed run left it.
  SceneGenerator generator(train_set, opts.seed);
  for (int64_t i = 0; i < scenes_drawn; ++i) generator.next_scene();

  auto save = [&](int64_t step) {
    if (opts.checkpoint.empty()) return;
    nn::Metadata meta = model.config().to_metadata();
    meta["scenes_drawn"] = std::to_string(scenes_drawn);
    meta["seed"] = std::to_string(opts.seed);
    meta["total_steps"] = std::to_string(opts.steps);
    meta["dtype"] = std::string(dtype_name(opts.dtype));  // of the training forward; weights are float32
    distributed::save_checkpoint(opts.checkpoint, model, adam, step, meta, scaler_ptr);  // rank 0 writes
  };

  const int64_t todo = opts.steps - result.start_step;
  if (todo <= 0) return result;
  model.train();
  ProgressBar bar(opts.steps, opts.print_every, opts.log ? opts.log : stdout, opts.log ? -1 : 0,
                  result.start_step);
  bar.set_loss_label("avg loss");  // a running average (0.95 per step) of the steps' losses
  StepProfiler profile(distributed::is_main_process() ? opts.profile_trace : "", 1, 3, opts.log);
  PhaseTimes times;
  std::vector<double> recent;
  double ema = 0;
  auto start = Clock::now();
  for (int64_t step = result.start_step + 1; step <= opts.steps; ++step) {
    profile.step();
    auto t0 = Clock::now();
    SceneBatch batch =
        ddp ? next_shard(generator, train_set, opts.batch_size, mine) : generator.next_batch(opts.batch_size);
    scenes_drawn += opts.batch_size;
    // Only the columns up to the longest caption in the batch: the rest is padding everywhere.
    int64_t T = 0;
    for (int64_t len : batch.lengths.to_vector<int64_t>()) T = std::max(T, len);
    Tensor tokens = batch.tokens.narrow(1, 0, T);
    Tensor input = tokens.narrow(1, 0, T - 1).contiguous().to(opts.device);
    Tensor target = tokens.narrow(1, 1, T - 1).contiguous().reshape({-1}).to(opts.device);
    Tensor images = batch.images.to(opts.device);
    auto t1 = Clock::now(), t2 = t1;
    Variable loss;
    {
      std::optional<AutocastGuard> autocast;  // the forward in 16 bits where the policy says so
      if (opts.dtype != DType::Float32) autocast.emplace(opts.dtype);
      Variable memory = model.encode(images);
      t2 = Clock::now();
      Variable logits = model.decode(memory, input);
      loss = cross_entropy(reshape(logits, {-1, V}), target, Vocab::kPad);
    }
    double loss_value = loss.item<double>();
    auto t3 = Clock::now();
    adam.zero_grad();
    (scaler ? scaler->scale(loss) : loss).backward();
    if (ddp) {
      ddp->synchronize();
      result.comm_wait_seconds += ddp->last_wait_seconds();
      loss_value = mean_over_ranks(loss_value);  // for the progress line: the global batch's loss
    }
    auto t4 = Clock::now();
    if (scaler) scaler->unscale_(adam);  // clipping needs the true gradients
    nn::clip_grad_norm_(params, opts.clip);
    if (scaler) {
      scaler->step(adam);  // skipped when a gradient overflowed float16
      scaler->update();
    } else {
      adam.step();
    }
    schedule.step();
    auto t5 = Clock::now();
    if (opts.profile) {
      auto d = [](Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double>(b - a).count();
      };
      times.data += d(t0, t1), times.encode += d(t1, t2), times.decode += d(t2, t3),
          times.backward += d(t3, t4), times.optimizer += d(t4, t5);
    }
    ema = step == result.start_step + 1 ? loss_value : 0.95 * ema + 0.05 * loss_value;
    recent.push_back(loss_value);
    if (opts.log) bar.update(step, ema);
    profile.end_step(step == opts.steps);
    if (opts.checkpoint_every > 0 && step % opts.checkpoint_every == 0 && step < opts.steps) save(step);
  }
  if (opts.log) bar.finish();
  profile.finish();
  result.steps_done = todo;
  result.seconds = seconds_since(start);
  size_t n = std::min<size_t>(recent.size(), 100);
  for (size_t i = recent.size() - n; i < recent.size(); ++i) result.final_loss += recent[i] / n;
  save(opts.steps);
  if (opts.profile && opts.log) times.print(opts.log, todo);
  return result;
}

EvalResult evaluate_captioner(Captioner& model, const SceneBatch& test, Device device, int64_t batch_size) {
  const int64_t N = test.images.size(0);
  SACCADE_CHECK(N > 0 && batch_size > 0,
                "evaluate_captioner: need scenes and a positive batch size, got {} and {}", N, batch_size);
  const Vocab vocab;
  EvalResult r;
  auto start = Clock::now();
  bool was_training = model.is_training();
  model.eval();
  {
    NoGradGuard no_grad;
    for (int64_t s = 0; s < N; s += batch_size) {
      int64_t n = std::min(batch_size, N - s);
      Tensor images = test.images.narrow(0, s, n).contiguous().to(device);
      GreedyOutput out = model.greedy(model.encode(images), kMaxCaptionTokens - 1);
      Tensor tokens = out.tokens.to(Device::cpu()).contiguous();
      Tensor attention = out.attention.to(Device::cpu()).contiguous();
      const int64_t T = tokens.size(1);
      const int64_t* tok = tokens.data<int64_t>();
      for (int64_t b = 0; b < n; ++b) {
        std::vector<int64_t> row;
        for (int64_t t = 0; t < T; ++t) {
          row.push_back(tok[b * T + t]);
          if (row.back() == Vocab::kEos) break;
        }
        r.attention.push_back(attention.select(0, b).narrow(0, 0, static_cast<int64_t>(row.size())).clone());
        r.generated.push_back(std::move(row));
      }
    }
  }
  model.train(was_training);
  std::vector<TokenSeq> candidates, references;
  std::vector<std::vector<SceneItem>> truth;
  const int64_t* ref = test.tokens.contiguous().data<int64_t>();
  for (int64_t b = 0; b < N; ++b) {
    candidates.push_back(Vocab::strip(r.generated[b]));
    references.push_back(
        Vocab::strip(std::vector<int64_t>(ref + b * kMaxCaptionTokens, ref + (b + 1) * kMaxCaptionTokens)));
    truth.push_back(test.scenes[b].items);
  }
  r.exact_match = exact_match_rate(candidates, references);
  r.bleu4 = corpus_bleu(candidates, references);
  r.item_accuracy = item_accuracy(truth, r.generated, vocab);
  Localization loc = attention_localization(r.generated, r.attention, vocab);
  r.localization = loc.mean;
  r.localization_tokens = loc.count;
  r.seconds = seconds_since(start);
  return r;
}

void print_metrics(std::FILE* out, const EvalResult& r) {
  std::fprintf(out, "exact_match %.4f\n", r.exact_match);
  std::fprintf(out, "bleu4 %.4f\n", r.bleu4);
  std::fprintf(out, "item_accuracy %.4f\n", r.item_accuracy);
  std::fprintf(out, "attention_localization %.4f\n", r.localization);
  std::fflush(out);
}

std::vector<std::string> write_caption_pictures(const std::string& dir, const SceneBatch& test,
                                                const EvalResult& result, int64_t count) {
  std::filesystem::create_directories(dir);
  const Vocab vocab;
  std::vector<std::string> written;
  count = std::min<int64_t>(count, static_cast<int64_t>(result.generated.size()));
  for (int64_t i = 0; i < count; ++i) {
    Tensor image = test.images.select(0, i);
    std::string scene_path = fmt::format("{}/scene_{}.png", dir, i);
    write_png(scene_path, image);
    written.push_back(scene_path);
    std::vector<std::string> words;
    for (int64_t id : result.generated[i]) words.push_back(vocab.token(id));
    if (words.empty() || !plots_available()) continue;  // without PLplot: the scenes only
    std::string overlay_path = fmt::format("{}/attention_{}.png", dir, i);
    write_attention_overlay(overlay_path, image, words, result.attention[i]);
    written.push_back(overlay_path);
  }
  return written;
}

}  // namespace saccade::examples
