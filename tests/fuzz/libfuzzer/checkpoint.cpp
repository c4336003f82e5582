// libFuzzer target: a full training-checkpoint resume as train_gpt does it (examples::resume_gpt): the
// model (a tiny GPT), the AdamW state, the step, the window count and the dropout generator.
// Properties: a rejected file gets a saccade::Error naming it and leaves model, optimizer and generator as
// they were; an accepted one leaves the file's tensors in the model and the optimizer and its generator in
// the model; saved again (save_checkpoint) and resumed into a fresh twin, it gives the same state; and one
// training step then runs (or throws saccade::Error) on the loaded state.
#include <algorithm>

#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "examples/gpt/training.h"
#include "ops/creation.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"
#include "tests/fuzz/libfuzzer/fuzz_gpt.h"

using namespace saccade;

namespace {

/// AdamW whose state can be read without copies (state_dict copies every tensor, which on a rejected file,
/// compared before and after, was a quarter of the target's time).
struct LiveAdamW : nn::AdamW {
  using nn::AdamW::AdamW;
  /// Each parameter's state tensors ("<i>.<key>", sharing their storage) and each group's lr and weight
  /// decay.
  void add_live_state(std::vector<std::pair<std::string, Tensor>>& tensors,
                      std::vector<double>& hyper) const {
    for (size_t i = 0; i < state_.size(); ++i)
      for (const auto& [key, t] : state_[i]) tensors.emplace_back(std::to_string(i) + "." + key, t);
    for (const Group& g : groups_) hyper.insert(hyper.end(), {g.lr, g.weight_decay});
  }
};

/// What a rejected file must leave as it was: the model's tensors, the optimizer's state and
/// hyperparameters, and the dropout generator.
struct Observed {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<double> hyper;
  std::pair<uint64_t, uint64_t> generator;

  /// The same with every tensor copied: what the state was, whatever happens to the model later.
  Observed copy() const {
    Observed c{{}, hyper, generator};
    for (const auto& [k, t] : tensors) c.tensors.emplace_back(k, t.clone());
    return c;
  }
  bool operator==(const Observed& o) const {
    return hyper == o.hyper && generator == o.generator && tensors.size() == o.tensors.size() &&
           std::equal(tensors.begin(), tensors.end(), o.tensors.begin(), [](const auto& a, const auto& b) {
             return a.first == b.first && fuzz::same_tensor(a.second, b.second);
           });
  }
};

struct Run {
  examples::GPT model{fuzz::tiny_gpt_config(), 1};
  LiveAdamW adamw{{nn::ParamGroup{model.decayed_parameters(), std::nullopt, 0.1},
                   nn::ParamGroup{model.undecayed_parameters(), std::nullopt, 0.0}}};

  /// The model's and the optimizer's state_dict (the optimizer's keys prefixed "optimizer.", as in the file).
  nn::StateDict state() const {
    nn::StateDict out = model.state_dict();
    for (const auto& [k, t] : adamw.state_dict()) out.insert("optimizer." + k, t);
    return out;
  }
  /// The state as it is now, sharing the model's and the optimizer's storage.
  Observed observe() {
    Observed o;
    for (const auto& [k, t] : model.state_dict()) o.tensors.emplace_back(k, t);
    adamw.add_live_state(o.tensors, o.hyper);
    o.generator = generator();
    return o;
  }
  std::pair<uint64_t, uint64_t> generator() { return {model.generator().seed(), model.generator().offset()}; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Run run, twin;
  // The state before this input: copied once, and again only after an accepted input changed it (a copy per
  // input was a third of the target's time).
  static Observed before = run.observe().copy();
  const std::string path = fuzz::write_input(data, size, "last.safetensors");
  examples::GPTResumeState st;
  try {
    st = examples::resume_gpt(path, run.model, run.adamw, fuzz::kTinyBatch);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    FUZZ_CHECK(run.observe() == before, "a rejected checkpoint changed the model, optimizer or generator");
    return 0;
  }
  const nn::Safetensors file = nn::load_safetensors(path);
  const nn::StateDict now = run.state();
  for (const auto& [k, t] : now)
    FUZZ_CHECK(file.tensors.contains(k) && fuzz::same_tensor(file.tensors.at(k).to(t.dtype()), t),
               "'{}' is not the file's tensor after the resume", k);
  FUZZ_CHECK(run.generator() == std::make_pair(st.dropout_seed, st.dropout_offset), "generator not restored");

  nn::Metadata meta = file.metadata;
  meta.erase("step");
  const std::string again = fuzz::scratch("last_again.safetensors");
  nn::save_checkpoint(again, run.model, run.adamw, st.step, meta);
  const examples::GPTResumeState st2 = examples::resume_gpt(again, twin.model, twin.adamw, fuzz::kTinyBatch);
  FUZZ_CHECK(fuzz::same_dict(twin.state(), now) && twin.generator() == run.generator() &&
                 st2.step == st.step && st2.windows == st.windows,
             "the resumed state changed in a save and resume");

  // One training step on what was loaded: any value is allowed, a crash is not.
  try {
    Tensor x = ops::zeros({1, 2}, DType::Int64), y = ops::ones({1, 2}, DType::Int64);
    Variable logits = run.model.forward(x);
    Variable loss = cross_entropy(reshape(logits, {2, 8}), y.reshape({2}));
    run.adamw.zero_grad();
    loss.backward();
    run.adamw.step();
  } catch (const Error&) {
  }
  before = run.observe().copy();
  return 0;
}
