// libFuzzer target: nn::load (a safetensors file into a module's state_dict, strictly) into a small model
// (fuzz::SmallModel: embedding, LayerNorm, linear).
// Properties: a rejected file gets a saccade::Error naming it and leaves the model exactly as it was; an
// accepted file's model tensors are now the model's (converted to its dtype), and the model saved and loaded
// into a fresh one gives the same state_dict.
#include "nn/serialization.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"

using namespace saccade;

namespace {
nn::StateDict snapshot(const nn::Module& m) {
  nn::StateDict out;
  for (const auto& [k, t] : m.state_dict()) out.insert(k, t.clone());
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::SmallModel model;
  static nn::StateDict before = snapshot(model);  // taken again only when an accepted file changed the model
  const std::string path = fuzz::write_input(data, size, "model.safetensors");
  try {
    nn::load(model, path);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    FUZZ_CHECK(fuzz::same_dict(model.state_dict(), before), "a rejected file changed the model");
    return 0;
  }
  before = snapshot(model);
  const nn::Safetensors file = nn::load_safetensors(path);
  for (const auto& [k, t] : model.state_dict())
    FUZZ_CHECK(file.tensors.contains(k) && fuzz::same_tensor(file.tensors.at(k).to(t.dtype()), t),
               "parameter '{}' is not the file's tensor", k);
  const std::string again = fuzz::scratch("model_again.safetensors");
  nn::save(model, again);
  fuzz::SmallModel fresh;
  nn::load(fresh, again);
  FUZZ_CHECK(fuzz::same_dict(fresh.state_dict(), model.state_dict()), "the model changed in a save and load");
  return 0;
}
