#include "examples/gpt/finetune.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "nn/lora.h"
#include "nn/optim.h"
#include "nn/scheduler.h"
#include "ops/error.h"

namespace saccade::examples {

namespace {

// Sum of the cross-entropy over the batch's scored targets, and their number.
std::pair<Variable, int64_t> batch_loss(const LogitsFn& logits, const Batch& b) {
  const Variable z = logits(b.x);
  const Tensor y = b.y.reshape({-1});
  int64_t n = 0;
  for (int64_t i = 0; i < y.numel(); ++i) n += y.data<int64_t>()[i] != -100;
  return {cross_entropy(reshape(z, {-1, z.size(-1)}), y, -100, Reduction::Sum), n};
}

}  // namespace

double completion_loss(nn::Module& model, const LogitsFn& logits,
                       const std::vector<TokenizedExample>& examples, int64_t batch_size, int64_t pad) {
  SACCADE_CHECK(!examples.empty() && batch_size >= 1, "completion_loss: {} examples in batches of {}",
                examples.size(), batch_size);
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  double nats = 0;
  int64_t count = 0;
  for (size_t start = 0; start < examples.size(); start += batch_size) {
    std::vector<int64_t> rows(std::min<size_t>(batch_size, examples.size() - start));
    std::iota(rows.begin(), rows.end(), static_cast<int64_t>(start));
    const auto [sum, n] = batch_loss(logits, instruct_batch(examples, rows, pad));
    nats += sum.data().to(DType::Float64).item<double>();
    count += n;
  }
  model.train(was_training);
  return nats / static_cast<double>(count);
}

std::string finetune_log_csv(const FinetuneLog& log) {
  std::string out = "step,train_loss,val_loss\n";
  size_t v = 0;
  for (size_t i = 0; i < log.train_loss.size(); ++i) {
    const int64_t step = static_cast<int64_t>(i) + 1;
    out += fmt::format("{},{:.6f},", step, log.train_loss[i]);
    if (v < log.val_loss.size() && log.val_loss[v].first == step)
      out += fmt::format("{:.6f}", log.val_loss[v++].second);
    out += "\n";
  }
  return out;
}

FinetuneLog finetune_lora(nn::Module& model, const LogitsFn& logits,
                          const std::vector<TokenizedExample>& train,
                          const std::vector<TokenizedExample>& val, const FinetuneOptions& opts, int64_t pad,
                          const std::function<void(const std::string&)>& report) {
  SACCADE_CHECK(!train.empty(), "finetune_lora: no training examples");
  SACCADE_CHECK(opts.steps >= 1 && opts.batch_size >= 1,
                "finetune_lora: steps {} and batch_size {} must be >= 1", opts.steps, opts.batch_size);
  const std::vector<Variable> params = nn::trainable_parameters(model);
  SACCADE_CHECK(!params.empty(), "finetune_lora: the model has no trainable parameters (apply_lora first)");
  nn::AdamOptions o;
  o.lr = opts.lr, o.weight_decay = opts.weight_decay;
  nn::AdamW opt(params, o);
  nn::LinearWarmup schedule(opt, opts.warmup, 0.1, opts.steps - opts.warmup, 0.0);
  std::mt19937_64 rng(opts.seed);
  std::vector<int64_t> order(train.size());
  size_t next = order.size();  // a fresh order at the first step
  FinetuneLog log;
  auto evaluate = [&](int64_t step) {
    if (val.empty()) return;
    const double v = completion_loss(model, logits, val, opts.batch_size, pad);
    log.val_loss.emplace_back(step, v);
    report(fmt::format("step {}: validation loss {:.4f} (completion tokens)", step, v));
  };
  model.train();
  for (int64_t step = 1; step <= opts.steps; ++step) {
    std::vector<int64_t> rows;
    while (static_cast<int64_t>(rows.size()) < opts.batch_size) {
      if (next == order.size()) {  // a new epoch
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        next = 0;
      }
      rows.push_back(order[next++]);
    }
    const auto [sum, n] = batch_loss(logits, instruct_batch(train, rows, pad));
    const Variable loss = sum * (1.0 / static_cast<double>(std::max<int64_t>(n, 1)));
    opt.zero_grad();
    loss.backward();
    if (opts.clip > 0) nn::clip_grad_norm_(params, opts.clip);
    const double lr = schedule.get_lr()[0];
    opt.step();
    schedule.step();
    log.train_loss.push_back(loss.data().to(DType::Float64).item<double>());
    report(fmt::format("step {}/{}: loss {:.4f}, lr {:.3g}", step, opts.steps, log.train_loss.back(), lr));
    if (opts.eval_every > 0 && step % opts.eval_every == 0 && step != opts.steps) evaluate(step);
  }
  evaluate(opts.steps);
  return log;
}

}  // namespace saccade::examples
