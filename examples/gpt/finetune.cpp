#include "examples/gpt/finetune.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>

#include <fmt/format.h>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "nn/lora.h"
#include "nn/optim.h"
#include "nn/scheduler.h"
#include "nn/serialization.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace saccade::examples {

namespace {

// Sum of the cross-entropy over the batch's scored targets, and their number; packed rows (document_ids)
// through packed_logits.
std::pair<Variable, int64_t> batch_loss(const LogitsFn& logits, const PackedLogitsFn& packed_logits,
                                        const Batch& b) {
  const Variable z = b.document_ids.defined() ? packed_logits(b.x, b.document_ids) : logits(b.x);
  const Tensor y = b.y.reshape({-1});
  int64_t n = 0;
  for (int64_t i = 0; i < y.numel(); ++i) n += y.data<int64_t>()[i] != -100;
  return {cross_entropy(reshape(z, {-1, z.size(-1)}), y, -100, Reduction::Sum), n};
}

// The batch of examples `rows`: packed into rows of `pack` tokens when pack > 0, else one padded row each.
Batch batch_of(const std::vector<TokenizedExample>& examples, const std::vector<int64_t>& rows, int64_t pad,
               int64_t pack) {
  return pack > 0 ? packed_instruct_batch(examples, rows, pad, pack) : instruct_batch(examples, rows, pad);
}

constexpr const char* kFormat = "saccade-finetune-1";

}  // namespace

// The saved run: "param.<name>" the trainable parameters, "optimizer.<key>" AdamW's state, "log.train_loss"
// (step) float64, "log.val" (n, 2) float64 rows of (step, loss); metadata: format, step, shuffles (how many
// epochs' orders were drawn), next (the position in the current order), seed, batch_size, examples,
// generator_seed and generator_offset.
void save_run(const std::string& path, const nn::Module& model, const nn::AdamW& opt, const FinetuneLog& log,
              const RunPosition& at, const FinetuneOptions& opts, size_t examples) {
  nn::StateDict t;
  for (const auto& [name, p] : model.named_parameters())
    if (p.requires_grad()) t.insert("param." + name, p.data());
  for (const auto& [key, x] : opt.state_dict()) t.insert("optimizer." + key, x);
  t.insert("log.train_loss", ops::from_vector(log.train_loss, {static_cast<int64_t>(log.train_loss.size())}));
  std::vector<double> val;
  for (const auto& [step, loss] : log.val_loss) val.push_back(static_cast<double>(step)), val.push_back(loss);
  t.insert("log.val", ops::from_vector(val, {static_cast<int64_t>(log.val_loss.size()), 2}));
  nn::Metadata m = {{"format", kFormat},
                    {"step", std::to_string(at.step)},
                    {"shuffles", std::to_string(at.shuffles)},
                    {"next", std::to_string(at.next)},
                    {"seed", std::to_string(opts.seed)},
                    {"batch_size", std::to_string(opts.batch_size)},
                    {"examples", std::to_string(examples)},
                    {"pack", std::to_string(opts.pack)}};
  if (opts.generator) {
    m["generator_seed"] = std::to_string(opts.generator->seed());
    m["generator_offset"] = std::to_string(opts.generator->offset());
  }
  nn::save_safetensors(t, path, m);
}

RunPosition load_run(const std::string& path, nn::Module& model, nn::AdamW& opt, FinetuneLog& log,
                     const FinetuneOptions& opts, size_t examples) {
  const nn::Safetensors f = nn::load_safetensors(path);
  auto refuse = [&](const std::string& why) {
    throw Error(fmt::format("finetune_lora: --resume: '{}' {}", path, why));
  };
  auto meta = [&](const char* key) -> uint64_t {
    auto it = f.metadata.find(key);
    if (it == f.metadata.end()) refuse(fmt::format("has no \"{}\" (not a fine-tuning checkpoint)", key));
    try {
      size_t used = 0;
      const uint64_t v = std::stoull(it->second, &used);
      if (used == it->second.size()) return v;
    } catch (const std::exception&) {
    }
    refuse(fmt::format("has \"{}\" = '{}', not a count", key, it->second));
    return 0;
  };
  auto format = f.metadata.find("format");
  if (format == f.metadata.end() || format->second != kFormat)
    refuse("is not a fine-tuning checkpoint of this saccade (gpt finetune's OUT/last.safetensors)");
  auto same = [&](const char* key, uint64_t want, const char* flag) {
    const uint64_t got = meta(key);
    if (got != want)
      refuse(fmt::format("was made with {} {}, not {}: resume with the run's own settings", flag, got, want));
  };
  same("seed", opts.seed, "--seed");
  same("batch_size", static_cast<uint64_t>(opts.batch_size), "--batch-size");
  same("examples", examples, "that many training examples");
  // packed or not changes the float sums (a checkpoint from before this key resumes either way)
  auto rows = [](uint64_t p) {
    return p ? fmt::format("rows packed to {} tokens", p) : std::string("unpacked rows");
  };
  if (f.metadata.count("pack") && meta("pack") != static_cast<uint64_t>(opts.pack))
    refuse(fmt::format("was made with {}, not {}: resume with the run's own --pack", rows(meta("pack")),
                       rows(static_cast<uint64_t>(opts.pack))));
  RunPosition at;
  at.step = static_cast<int64_t>(meta("step"));
  at.shuffles = meta("shuffles");
  at.next = static_cast<size_t>(meta("next"));
  if (at.next > examples || (at.shuffles == 0 && at.step > 0))
    refuse("holds an impossible position in the data");
  // everything checked before anything changes
  std::vector<std::pair<Variable, const Tensor*>> params;
  size_t params_in_file = 0;
  for (const auto& [name, t] : f.tensors) params_in_file += name.starts_with("param.");
  for (const auto& [name, p] : model.named_parameters()) {
    if (!p.requires_grad()) continue;
    const Tensor* t = f.tensors.find("param." + name);
    if (!t) refuse(fmt::format("has no tensor for the trainable parameter '{}'", name));
    if (t->shape() != p.shape())
      refuse(fmt::format("holds '{}' of shape {}, the model's is {}", name, t->shape(), p.shape()));
    params.emplace_back(p, t);
  }
  if (params_in_file != params.size())
    refuse(fmt::format("holds {} trainable parameters, the model has {} (other adapters?)", params_in_file,
                       params.size()));
  nn::StateDict optimizer;
  for (const auto& [name, t] : f.tensors)
    if (name.starts_with("optimizer.")) optimizer.insert(name.substr(10), t);
  try {
    opt.check_state_dict(optimizer);
  } catch (const Error& e) {
    refuse(fmt::format("holds another optimizer state: {}", e.what()));
  }
  const Tensor* train = f.tensors.find("log.train_loss");
  const Tensor* val = f.tensors.find("log.val");
  if (!train || !val || train->numel() != at.step || val->dim() != 2 || val->size(1) != 2)
    refuse("has no log of its steps");
  // the validation rows: (step, loss) at steps 1 .. step, in increasing order
  const std::vector<double> v = val->to(DType::Float64).to_vector<double>();
  std::vector<std::pair<int64_t, double>> val_loss;
  for (size_t i = 0; i + 1 < v.size(); i += 2) {
    const int64_t last = val_loss.empty() ? 0 : val_loss.back().first;
    if (!(v[i] > static_cast<double>(last) && v[i] <= static_cast<double>(at.step) &&
          v[i] == std::floor(v[i])))
      refuse(fmt::format("logs a validation at step {} (after step {}, in a run of {} steps)", v[i], last,
                         at.step));
    val_loss.emplace_back(static_cast<int64_t>(v[i]), v[i + 1]);
  }
  const bool has_generator = opts.generator && f.metadata.count("generator_seed");
  const uint64_t generator_seed = has_generator ? meta("generator_seed") : 0;
  const uint64_t generator_offset = has_generator ? meta("generator_offset") : 0;
  // now change the run
  for (auto& [p, t] : params) {
    Tensor d = p.data();
    ops::copy_(d, *t);
  }
  opt.load_state_dict(optimizer);
  log.train_loss = train->to(DType::Float64).to_vector<double>();
  log.val_loss = std::move(val_loss);
  if (has_generator) {  // the dropout stream where it stopped
    opts.generator->manual_seed(generator_seed);
    opts.generator->advance(generator_offset);
  }
  return at;
}

double completion_loss(nn::Module& model, const LogitsFn& logits,
                       const std::vector<TokenizedExample>& examples, int64_t batch_size, int64_t pad,
                       int64_t pack, const PackedLogitsFn& packed_logits) {
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
    const auto [sum, n] =
        batch_loss(logits, packed_logits, batch_of(examples, rows, pad, packed_logits ? pack : 0));
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
  SACCADE_CHECK(opts.pack >= 0 && (opts.pack == 0 || opts.packed_logits),
                "finetune_lora: pack {} needs pack >= 0 and, when > 0, packed_logits", opts.pack);
  nn::AdamOptions o;
  o.lr = opts.lr, o.weight_decay = opts.weight_decay;
  nn::AdamW opt(params, o);
  nn::LinearWarmup schedule(opt, opts.warmup, 0.1, opts.steps - opts.warmup, 0.0);
  std::mt19937_64 rng(opts.seed);
  std::vector<int64_t> order(train.size());
  RunPosition at;
  at.next = order.size();  // a fresh order at the first step
  auto reshuffle = [&] {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    ++at.shuffles;
    at.next = 0;
  };
  FinetuneLog log;
  if (opts.resume && !opts.checkpoint.empty() && std::filesystem::exists(opts.checkpoint)) {
    const RunPosition saved = load_run(opts.checkpoint, model, opt, log, opts, train.size());
    for (uint64_t k = 0; k < saved.shuffles; ++k) reshuffle();  // the same orders, the same rng state
    at = saved;
    schedule.set_last_epoch(at.step);
    log.resumed_at = at.step;
    report(fmt::format("resumed from {} at step {}", opts.checkpoint, at.step));
  }
  auto save = [&] {
    if (!opts.checkpoint.empty()) save_run(opts.checkpoint, model, opt, log, at, opts, train.size());
  };
  auto evaluate = [&](int64_t step) {
    if (val.empty()) return;
    const double v = completion_loss(model, logits, val, opts.batch_size, pad, opts.pack, opts.packed_logits);
    log.val_loss.emplace_back(step, v);
    report(fmt::format("step {}: validation loss {:.4f} (completion tokens)", step, v));
  };
  model.train();
  if (at.step >= opts.steps) {
    report(fmt::format("the run is at step {}, reached --steps {}: nothing to train", at.step, opts.steps));
    return log;
  }
  for (int64_t step = at.step + 1; step <= opts.steps; ++step) {
    std::vector<int64_t> rows;
    while (static_cast<int64_t>(rows.size()) < opts.batch_size) {
      if (at.next == order.size()) reshuffle();  // a new epoch
      rows.push_back(order[at.next++]);
    }
    const auto [sum, n] = batch_loss(logits, opts.packed_logits, batch_of(train, rows, pad, opts.pack));
    const Variable loss = sum * (1.0 / static_cast<double>(std::max<int64_t>(n, 1)));
    opt.zero_grad();
    loss.backward();
    if (opts.clip > 0) nn::clip_grad_norm_(params, opts.clip);
    const double lr = schedule.get_lr()[0];
    opt.step();
    schedule.step();
    log.train_loss.push_back(loss.data().to(DType::Float64).item<double>());
    report(fmt::format("step {}/{}: loss {:.4f}, lr {:.3g}", step, opts.steps, log.train_loss.back(), lr));
    at.step = step;
    if (opts.eval_every > 0 && step % opts.eval_every == 0 && step != opts.steps) {
      evaluate(step);
      save();
    }
    if (step == opts.stop_at && step != opts.steps) {
      save();
      report(fmt::format("stopped at step {} as --stop-at asked: continue with --resume", step));
      return log;
    }
  }
  evaluate(opts.steps);
  save();
  return log;
}

}  // namespace saccade::examples
