#include "examples/g2p/model.h"

#include <fmt/format.h>

#include "examples/g2p/bahdanau_g2p.h"
#include "examples/g2p/transformer_g2p.h"
#include "core/error.h"

namespace saccade::examples {
namespace {

std::string get(const nn::Metadata& m, const std::string& key) {
  auto it = m.find(key);
  SACCADE_CHECK(it != m.end(), "G2PConfig: the checkpoint's metadata has no '{}'", key);
  return it->second;
}

int64_t get_int(const nn::Metadata& m, const std::string& key) {
  try {
    return std::stoll(get(m, key));
  } catch (const std::logic_error&) {
    throw Error(fmt::format("G2PConfig: metadata '{}' is not a number", key));
  }
}

double get_double(const nn::Metadata& m, const std::string& key) {
  try {
    return std::stod(get(m, key));
  } catch (const std::logic_error&) {
    throw Error(fmt::format("G2PConfig: metadata '{}' is not a number", key));
  }
}

}  // namespace

G2PConfig G2PConfig::defaults(const std::string& model) {
  SACCADE_CHECK(model == "bahdanau" || model == "transformer",
                "G2PConfig: unknown model '{}' (bahdanau or transformer)", model);
  G2PConfig c;
  c.model = model;
  if (model == "transformer") c.label_smoothing = 0.1;
  return c;
}

nn::Metadata G2PConfig::to_metadata() const {
  return {{"model", model},
          {"embed", std::to_string(embed)},
          {"hidden", std::to_string(hidden)},
          {"d_model", std::to_string(d_model)},
          {"heads", std::to_string(heads)},
          {"layers", std::to_string(layers)},
          {"ffn", std::to_string(ffn)},
          {"dropout", fmt::format("{}", dropout)},
          {"label_smoothing", fmt::format("{}", label_smoothing)},
          {"stress", stress ? "1" : "0"},
          {"phones", phones}};
}

G2PConfig G2PConfig::from_metadata(const nn::Metadata& m) {
  G2PConfig c = defaults(get(m, "model"));
  c.embed = get_int(m, "embed");
  c.hidden = get_int(m, "hidden");
  c.d_model = get_int(m, "d_model");
  c.heads = get_int(m, "heads");
  c.layers = get_int(m, "layers");
  c.ffn = get_int(m, "ffn");
  c.dropout = get_double(m, "dropout");
  c.label_smoothing = get_double(m, "label_smoothing");
  c.phones = get(m, "phones");
  // Checkpoints written before --stress existed have no "stress" key: they were trained without stress.
  c.stress = m.count("stress") > 0 && get_int(m, "stress") != 0;
  return c;
}

std::string G2PConfig::describe() const {
  if (model == "bahdanau")
    return fmt::format("model bahdanau, embed {}, bi-GRU encoder {}x2, GRU decoder {}, dropout {}{}", embed,
                       hidden, hidden, dropout, stress ? ", phones with stress" : "");
  return fmt::format(
      "model transformer, d_model {}, heads {}, {} encoder + {} decoder blocks, ffn {}, dropout {}, "
      "label smoothing {}{}",
      d_model, heads, layers, layers, ffn, dropout, label_smoothing, stress ? ", phones with stress" : "");
}

std::shared_ptr<G2PModel> make_g2p_model(const G2PConfig& config, uint64_t seed) {
  if (config.model == "bahdanau") return std::make_shared<BahdanauG2P>(config, seed);
  SACCADE_CHECK(config.model == "transformer", "make_g2p_model: unknown model '{}'", config.model);
  return std::make_shared<TransformerG2P>(config, seed);
}

}  // namespace saccade::examples
