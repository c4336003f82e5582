#include "examples/image_caption/captioner.h"

#include <fmt/format.h>

#include "examples/image_caption/sat.h"
#include "examples/image_caption/transformer_captioner.h"
#include "core/error.h"

namespace saccade::examples {
namespace {

// The integer settings, by metadata key.
template <class C, class F>
void for_each_int(C& config, F&& f) {
  f("conv1", config.conv1), f("conv2", config.conv2), f("grid", config.grid), f("d_model", config.d_model),
      f("embed", config.embed), f("hidden", config.hidden), f("attn_hidden", config.attn_hidden),
      f("heads", config.heads), f("layers", config.layers), f("ffn", config.ffn);
}

}  // namespace

CaptionConfig CaptionConfig::defaults(const std::string& model) {
  SACCADE_CHECK(model == "sat" || model == "transformer",
                "CaptionConfig: unknown model \"{}\" (expected sat or transformer)", model);
  CaptionConfig c;
  c.model = model;
  return c;
}

nn::Metadata CaptionConfig::to_metadata() const {
  nn::Metadata m;
  m["model"] = model;
  for_each_int(*this, [&](const char* key, int64_t v) { m[key] = std::to_string(v); });
  m["dropout"] = fmt::format("{}", dropout);
  return m;
}

CaptionConfig CaptionConfig::from_metadata(const nn::Metadata& m) {
  auto get = [&](const char* key) -> const std::string& {
    auto it = m.find(key);
    SACCADE_CHECK(it != m.end(), "CaptionConfig: the checkpoint's metadata has no \"{}\"", key);
    return it->second;
  };
  CaptionConfig c = defaults(get("model"));
  for_each_int(c, [&](const char* key, int64_t& v) {
    try {
      v = std::stoll(get(key));
    } catch (const std::logic_error&) {
      SACCADE_CHECK(false, "CaptionConfig: metadata \"{}\" is not a number: \"{}\"", key, get(key));
    }
  });
  c.dropout = std::stod(get("dropout"));
  return c;
}

std::string CaptionConfig::describe() const {
  if (model == "sat")
    return fmt::format(
        "model sat, conv {}/{}, grid {}x{}, d_model {}, embed {}, GRU hidden {}, attention hidden {}", conv1,
        conv2, grid, grid, d_model, embed, hidden, attn_hidden);
  return fmt::format(
      "model transformer, conv {}/{}, grid {}x{}, d_model {}, {} layers, {} heads, ffn {}, dropout {}", conv1,
      conv2, grid, grid, d_model, layers, heads, ffn, dropout);
}

std::shared_ptr<Captioner> make_captioner(const CaptionConfig& config, uint64_t seed) {
  if (config.model == "sat") return std::make_shared<SatCaptioner>(config, seed);
  if (config.model == "transformer") return std::make_shared<TransformerCaptioner>(config, seed);
  SACCADE_CHECK(false, "make_captioner: unknown model \"{}\"", config.model);
  return nullptr;
}

}  // namespace saccade::examples
