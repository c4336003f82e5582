// libFuzzer target: a GPT checkpoint with its tokenizer, as `gpt --sample` opens them
// (examples::load_gpt, then examples::make_tokenizer with the checkpoint's "tokenizer" from its folder,
// which holds the SentencePiece model tests/fuzz/libfuzzer/data/tokenizer.model).
// Properties: a rejected checkpoint gets a saccade::Error naming it; an accepted one builds a model of
// exactly the file's size (GPTConfig::num_parameters, checked before building), holding the file's tensors;
// it saves and loads again to the same tensors; a prompt then encodes and runs through the model (or
// throws saccade::Error, e.g. for a token id past a vocabulary that does not match the tokenizer's).
#include "examples/gpt/tokenizer.h"
#include "examples/gpt/training.h"
#include "ops/creation.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"

using namespace saccade;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    std::filesystem::create_directories(fuzz::scratch("gpt"));
    std::filesystem::copy_file(SACCADE_FUZZ_DIR "/data/tokenizer.model", fuzz::scratch("gpt/tokenizer.model"),
                               std::filesystem::copy_options::overwrite_existing);
    return fuzz::scratch("gpt");
  }();
  const std::string path = fuzz::write_input(data, size, "gpt/best.safetensors");
  std::shared_ptr<examples::GPT> model;
  try {
    model = examples::load_gpt(path);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    return 0;
  }
  const examples::GPTConfig& config = model->config();
  FUZZ_CHECK(model->num_parameters() == config.num_parameters(), "{}: {} parameters, num_parameters() {}",
             config.describe(), model->num_parameters(), config.num_parameters());
  const nn::Safetensors file = nn::load_safetensors(path);
  for (const auto& [k, t] : model->state_dict())
    FUZZ_CHECK(file.tensors.contains(k) && fuzz::same_tensor(file.tensors.at(k).to(t.dtype()), t),
               "'{}' is not the file's tensor", k);
  const std::string again = fuzz::scratch("gpt/again.safetensors");
  nn::save(*model, again, config.to_metadata());
  std::shared_ptr<examples::GPT> twin = examples::load_gpt(again);
  for (const auto& [k, t] : model->state_dict())
    FUZZ_CHECK(fuzz::same_tensor(twin->state_dict().at(k), t), "'{}' changed in a save and load", k);

  // load_gpt refused unknown tokenizer names (naming the file): this one is "byte" or "bpe", whose model is
  // in `dir`, so an error here is a crash
  std::unique_ptr<examples::Tokenizer> tok = examples::make_tokenizer(config.tokenizer, dir);
  std::vector<int64_t> ids = tok->encode("to be");
  ids.resize(std::min<size_t>(ids.size(), static_cast<size_t>(config.context)));
  try {
    Variable logits = model->forward(ops::from_vector(ids, {1, static_cast<int64_t>(ids.size())}));
    FUZZ_CHECK(logits.shape() == Shape({1, static_cast<int64_t>(ids.size()), config.vocab_size}),
               "logits of shape {}", logits.shape());
  } catch (const Error&) {
  }
  return 0;
}
