// libFuzzer target: hf::load_adapter_config (the adapter_config.json of a LoRA adapter in PEFT's layout).
// Input: the adapter_config.json text.
// Properties: a rejected file raises saccade::Error naming it; an accepted one holds what the adapters can be
// built from (r >= 1, a positive finite lora_alpha, lora_dropout in [0, 1), target_modules of non-empty
// names or "all-linear"); apply_lora on a tiny Llama either adapts at least one module or refuses with an
// error naming apply_lora (a target no module has), the model untouched; and an adapter saved with that
// config (hf::save_adapter) reads back as the same r, lora_alpha, lora_dropout and use_rslora.
#include <cmath>
#include <string>

#include "hf/peft.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"
#include "tests/fuzz/libfuzzer/fuzz_hf.h"

using namespace saccade;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = fuzz::scratch("adapter");
  std::filesystem::create_directories(dir);
  const std::string path = fuzz::write_input(data, size, "adapter/adapter_config.json");
  hf::AdapterConfig c;
  try {
    c = hf::load_adapter_config(dir);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    return 0;
  }
  const nn::LoraConfig& l = c.lora;
  FUZZ_CHECK(l.r >= 1, "r {}", l.r);
  FUZZ_CHECK(std::isfinite(l.lora_alpha) && l.lora_alpha > 0, "lora_alpha {}", l.lora_alpha);
  FUZZ_CHECK(l.lora_dropout >= 0 && l.lora_dropout < 1, "lora_dropout {}", l.lora_dropout);
  FUZZ_CHECK(!l.target_modules.empty(), "no target_modules");
  for (const std::string& t : l.target_modules) FUZZ_CHECK(!t.empty(), "an empty target name");
  FUZZ_CHECK(std::isfinite(l.scale()) && l.scale() > 0, "scale {}", l.scale());
  if (l.r > 64) return 0;  // the factors of a larger rank would only cost memory here

  nn::LlamaForCausalLM model(fuzz::tiny_llama_config(false));
  std::vector<std::string> adapted;
  try {
    adapted = nn::apply_lora(model, l);
  } catch (const Error& e) {
    const std::string msg = e.what();
    FUZZ_CHECK(msg.find("apply_lora") != std::string::npos, "apply_lora's error does not name it: {}", msg);
    FUZZ_CHECK(nn::lora_layers(model).empty(), "a refused apply_lora changed the model");
    return 0;
  }
  FUZZ_CHECK(!adapted.empty() && adapted.size() == nn::lora_layers(model).size(), "{} adapted, {} layers",
             adapted.size(), nn::lora_layers(model).size());
  const std::string again = fuzz::scratch("saved");
  hf::save_adapter(again, model, l, c.base_model_name_or_path);
  hf::AdapterConfig back;
  try {
    back = hf::load_adapter_config(again);
  } catch (const Error& e) {
    FUZZ_CHECK(false, "save_adapter wrote a config load_adapter_config refuses: {}", e.what());
  }
  FUZZ_CHECK(back.lora.r == l.r && back.lora.lora_alpha == l.lora_alpha &&
                 back.lora.lora_dropout == l.lora_dropout && back.lora.use_rslora == l.use_rslora &&
                 back.base_model_name_or_path == c.base_model_name_or_path,
             "the saved config reads back otherwise (r {} -> {}, lora_alpha {} -> {})", l.r, back.lora.r,
             l.lora_alpha, back.lora.lora_alpha);
  return 0;
}
