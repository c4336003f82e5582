#include "examples/g2p/training.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>

#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "examples/common/progress.h"
#include "examples/common/step_profiler.h"
#include "examples/g2p/decoding.h"
#include "nn/optim.h"
#include "nn/scheduler.h"
#include "nn/serialization.h"
#include "core/error.h"

namespace saccade::examples {
namespace {

using Clock = std::chrono::steady_clock;

double metadata_double(const nn::Metadata& m, const std::string& key, double fallback) {
  auto it = m.find(key);
  return it == m.end() ? fallback : std::stod(it->second);
}

}  // namespace

G2PTrainResult train_g2p(G2PModel& model, const G2PVocab& vocab, const std::vector<DictWord>& train,
                         const std::vector<DictWord>& validation, const G2PTrainOptions& opts) {
  SACCADE_CHECK(opts.steps >= 1 && opts.batch_size >= 1 && opts.lr > 0 && opts.warmup >= 0,
                "train_g2p: need steps, batch_size, lr > 0 and warmup >= 0, got {}, {}, {}, {}", opts.steps,
                opts.batch_size, opts.lr, opts.warmup);
  const int64_t V = vocab.num_phones();
  std::vector<G2PExample> examples = make_examples(train, vocab);
  std::vector<DictWord> val(
      validation.begin(),
      validation.begin() + std::min<int64_t>(opts.val_words, static_cast<int64_t>(validation.size())));
  std::vector<Variable> params = model.parameters();
  nn::Adam adam(params, nn::AdamOptions{.lr = opts.lr});
  const int64_t warmup = std::min(opts.warmup, opts.steps - 1);
  nn::LinearWarmup schedule(adam, warmup, 0.1, std::max<int64_t>(opts.steps - warmup, 1), opts.lr / 20);

  G2PTrainResult result;
  if (opts.resume && !opts.checkpoint.empty() && std::filesystem::exists(opts.checkpoint)) {
    nn::CheckpointInfo info = nn::load_checkpoint(opts.checkpoint, model, adam);
    result.start_step = info.step;
    result.best_wer = metadata_double(info.metadata, "best_wer", 1);
    result.best_per = metadata_double(info.metadata, "best_per", 1);
    result.best_step = static_cast<int64_t>(metadata_double(info.metadata, "best_step", 0));
    schedule.set_last_epoch(info.step);
    if (opts.log)
      std::fprintf(opts.log, "resumed from %s at step %lld\n", opts.checkpoint.c_str(),
                   static_cast<long long>(info.step));
  }
  // The batch stream continues where the checkpointed run left it (one batch per step).
  BucketSampler sampler(examples, opts.batch_size, opts.seed);
  for (int64_t i = 0; i < result.start_step; ++i) sampler.next();

  auto metadata = [&] {
    nn::Metadata meta = model.config().to_metadata();
    meta["seed"] = std::to_string(opts.seed);
    meta["total_steps"] = std::to_string(opts.steps);
    meta["best_wer"] = fmt::format("{}", result.best_wer);
    meta["best_per"] = fmt::format("{}", result.best_per);
    meta["best_step"] = std::to_string(result.best_step);
    return meta;
  };
  auto validate = [&](int64_t step) {
    if (val.empty()) return;
    G2PEval e = evaluate_g2p(model, vocab, val, /*beam=*/1);
    // the first validation is the best so far whatever it scores (best_step 0: none yet), so that a run that
    // validated leaves a best.safetensors even when no score beats WER 1 (a tiny or a diverged model)
    bool better = result.best_step == 0 || e.score.wer < result.best_wer ||
                  (e.score.wer == result.best_wer && e.score.per < result.best_per);
    if (better) result.best_wer = e.score.wer, result.best_per = e.score.per, result.best_step = step;
    if (better && !opts.best.empty()) nn::save_checkpoint(opts.best, model, adam, step, metadata());
    if (opts.log)
      std::fprintf(opts.log, "\nstep %lld: validation (%zu words, greedy) WER %.4f PER %.4f%s (%.1f s)\n",
                   static_cast<long long>(step), val.size(), e.score.wer, e.score.per,
                   better ? " *best*" : "", e.seconds);
  };

  const int64_t todo = opts.steps - result.start_step;
  if (todo <= 0) return result;
  model.train();
  ProgressBar bar(opts.steps, opts.print_every, opts.log ? opts.log : stdout, opts.log ? -1 : 0,
                  result.start_step);
  bar.set_loss_label("avg loss");  // a running average (0.95 per step) of the steps' losses
  StepProfiler profile(opts.profile_trace, 1, 3, opts.log);
  std::vector<double> losses;
  double ema = 0, tokens = 0;
  auto start = Clock::now();
  for (int64_t step = result.start_step + 1; step <= opts.steps; ++step) {
    profile.step();
    G2PBatch batch = make_batch(examples, sampler.next());
    Variable logits = model.forward(batch.letters.to(opts.device), batch.lens.to(opts.device),
                                    batch.phones_in.to(opts.device));
    Variable loss = cross_entropy(reshape(logits, {-1, V}), batch.phones_out.reshape({-1}).to(opts.device),
                                  G2PVocab::kPad, Reduction::Mean, model.config().label_smoothing);
    double loss_value = loss.item<double>();
    adam.zero_grad();
    loss.backward();
    nn::clip_grad_norm_(params, opts.clip);
    adam.step();
    schedule.step();
    tokens += static_cast<double>(batch.target_tokens);
    losses.push_back(loss_value);
    ema = step == result.start_step + 1 ? loss_value : 0.95 * ema + 0.05 * loss_value;
    if (opts.log) {
      double s = std::chrono::duration<double>(Clock::now() - start).count();
      bar.update(step, ema, fmt::format("{:.0f} tokens/s", s > 0 ? tokens / s : 0.0));
    }
    const bool last = step == opts.steps;
    profile.end_step(last || (opts.val_every > 0 && step % opts.val_every == 0));  // never the validation
    if (opts.val_every > 0 && (step % opts.val_every == 0 || last)) {
      validate(step);
      model.train();
      if (!opts.checkpoint.empty()) nn::save_checkpoint(opts.checkpoint, model, adam, step, metadata());
    } else if (last && !opts.checkpoint.empty()) {
      nn::save_checkpoint(opts.checkpoint, model, adam, step, metadata());
    }
  }
  if (opts.log) bar.finish();
  profile.finish();
  result.steps_done = todo;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // the first and the last steps' means, over steps that do not overlap (a 30-step run: 15 and 15)
  const size_t f = std::min<size_t>(20, std::max<size_t>(1, losses.size() / 2));
  const size_t n = std::min<size_t>(100, std::max<size_t>(1, losses.size() - f));
  result.first_steps = static_cast<int64_t>(f), result.final_steps = static_cast<int64_t>(n);
  for (size_t i = losses.size() - n; i < losses.size(); ++i)
    result.final_loss += losses[i] / static_cast<double>(n);
  for (size_t i = 0; i < f; ++i) result.first_loss += losses[i] / static_cast<double>(f);
  return result;
}

}  // namespace saccade::examples
