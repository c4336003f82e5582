// libFuzzer target: a full training-checkpoint resume as train_gpt does it (examples::resume_gpt): the
// model (a tiny GPT), the AdamW state, the step, the window count and the dropout generator.
// Properties: a rejected file gets a saccade::Error naming it and leaves model, optimizer and generator as
// they were; an accepted one leaves the file's tensors in the model and the optimizer and its generator in
// the model; saved again (save_checkpoint) and resumed into a fresh twin, it gives the same state; and one
// training step then runs (or throws saccade::Error) on the loaded state.
#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "examples/gpt/training.h"
#include "ops/creation.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"
#include "tests/fuzz/libfuzzer/fuzz_gpt.h"

using namespace saccade;

namespace {

struct Run {
  examples::GPT model{fuzz::tiny_gpt_config(), 1};
  nn::AdamW adamw{{nn::ParamGroup{model.decayed_parameters(), std::nullopt, 0.1},
                   nn::ParamGroup{model.undecayed_parameters(), std::nullopt, 0.0}}};

  nn::StateDict snapshot() const {
    nn::StateDict out;
    for (const auto& [k, t] : model.state_dict()) out.insert(k, t.clone());
    for (const auto& [k, t] : adamw.state_dict()) out.insert("optimizer." + k, t.clone());
    return out;
  }
  std::pair<uint64_t, uint64_t> generator() { return {model.generator().seed(), model.generator().offset()}; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Run run, twin;
  const std::string path = fuzz::write_input(data, size, "last.safetensors");
  const nn::StateDict before = run.snapshot();
  const auto gen_before = run.generator();
  examples::GPTResumeState st;
  try {
    st = examples::resume_gpt(path, run.model, run.adamw, fuzz::kTinyBatch);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    FUZZ_CHECK(fuzz::same_dict(run.snapshot(), before) && run.generator() == gen_before,
               "a rejected checkpoint changed the model, optimizer or generator");
    return 0;
  }
  const nn::Safetensors file = nn::load_safetensors(path);
  const nn::StateDict now = run.snapshot();
  for (const auto& [k, t] : now)
    FUZZ_CHECK(file.tensors.contains(k) && fuzz::same_tensor(file.tensors.at(k).to(t.dtype()), t),
               "'{}' is not the file's tensor after the resume", k);
  FUZZ_CHECK(run.generator() == std::make_pair(st.dropout_seed, st.dropout_offset), "generator not restored");

  nn::Metadata meta = file.metadata;
  meta.erase("step");
  const std::string again = fuzz::scratch("last_again.safetensors");
  nn::save_checkpoint(again, run.model, run.adamw, st.step, meta);
  const examples::GPTResumeState st2 = examples::resume_gpt(again, twin.model, twin.adamw, fuzz::kTinyBatch);
  FUZZ_CHECK(fuzz::same_dict(twin.snapshot(), now) && twin.generator() == run.generator() &&
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
  return 0;
}
