#include "examples/gpt/model.h"

#include <fmt/format.h>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/linalg.h"
#include "core/error.h"
#include "nn/init.h"
#include "ops/creation.h"
#include "ops/quant.h"
#ifdef SACCADE_HAVE_HF
#include "examples/gpt/hf_gpt2.h"
#endif

namespace saccade::examples {

void GPTConfig::check() const {
  SACCADE_CHECK(
      vocab_size >= 1 && context >= 1 && n_layer >= 1 && n_head >= 1 && d_model >= 1 &&
          d_model % n_head == 0 && dropout >= 0 && dropout < 1,
      "GPTConfig: need positive sizes, n_head dividing d_model and dropout in [0, 1), got vocab {}, "
      "context {}, n_layer {}, n_head {}, d_model {}, dropout {}",
      vocab_size, context, n_layer, n_head, d_model, dropout);
  SACCADE_CHECK(activation == "gelu" || activation == "gelu_new",
                "GPTConfig: activation must be 'gelu' or 'gelu_new', got '{}'", activation);
  if (arch != "gpt2") {
    SACCADE_CHECK(n_kv_head >= 0 && n_head % kv_heads() == 0,
                  "GPTConfig: n_kv_head {} does not divide n_head {}", n_kv_head, n_head);
    SACCADE_CHECK((d_model / n_head) % 2 == 0, "GPTConfig: the head size {} is odd (rotary needs pairs)",
                  d_model / n_head);
    SACCADE_CHECK(
        rope_theta > 0 && norm_eps > 0 && intermediate >= 0 && window >= 0,
        "GPTConfig: need rope_theta > 0, norm_eps > 0, intermediate >= 0 and window >= 0, got {}, {}, "
        "{}, {}",
        rope_theta, norm_eps, intermediate, window);
    SACCADE_CHECK(!llama().output_router_logits,
                  "GPTConfig: a '{}' whose config asks for the router's load-balancing loss "
                  "(output_router_logits): gpt train adds no auxiliary loss",
                  arch);
  }
}

nn::LlamaConfig GPTConfig::llama() const {
  SACCADE_CHECK(arch != "gpt2", "GPTConfig: a gpt2 has no Llama blocks");
  if (arch != "llama" || !hf_config.empty()) {
#ifdef SACCADE_HAVE_HF
    return hf_row_llama_config(*this);
#else
    SACCADE_CHECK(false, "GPTConfig: arch '{}' needs hf/ (this build has none: 'gpt2' or 'llama')", arch);
#endif
  }
  nn::LlamaConfig c;
  c.hidden_size = d_model;
  c.intermediate_size = ffn_hidden();
  c.num_attention_heads = n_head;
  c.num_key_value_heads = kv_heads();
  c.head_dim = d_model / n_head;
  c.rms_norm_eps = norm_eps;
  c.rope_theta = rope_theta;
  c.vocab_size = vocab_size;
  c.num_hidden_layers = n_layer;
  c.max_position_embeddings = context;
  c.tie_word_embeddings = tie;
  c.sliding_window = window;
  return c;
}

std::string GPTConfig::describe() const {
  if (arch != "gpt2")
    return fmt::format(
               "{}: {} layers, {} heads ({} key/value), d_model {}, {} {}, context {}, vocab {} "
               "({}), rope_theta {}, {}, dropout {}",
               arch, n_layer, n_head, kv_heads(), d_model, llama().gated_mlp ? "SwiGLU" : "MLP", ffn_hidden(),
               context, vocab_size, tokenizer, rope_theta, tie ? "tied output" : "untied output", dropout) +
           (window > 0 ? fmt::format(", window {}", window) : "");
  return fmt::format("gpt: {} layers, {} heads, d_model {}, context {}, vocab {} ({}), dropout {}", n_layer,
                     n_head, d_model, context, vocab_size, tokenizer, dropout);
}

nn::Metadata GPTConfig::to_metadata() const {
  nn::Metadata m = {{"model", "gpt"},
                    {"vocab_size", std::to_string(vocab_size)},
                    {"context", std::to_string(context)},
                    {"n_layer", std::to_string(n_layer)},
                    {"n_head", std::to_string(n_head)},
                    {"d_model", std::to_string(d_model)},
                    {"dropout", fmt::format("{}", dropout)},
                    {"tokenizer", tokenizer},
                    {"activation", activation},
                    {"arch", arch}};
  if (arch != "gpt2") {
    m["n_kv_head"] = std::to_string(kv_heads());
    m["rope_theta"] = fmt::format("{}", rope_theta);
    m["intermediate"] = std::to_string(ffn_hidden());
    m["norm_eps"] = fmt::format("{}", norm_eps);
    m["tie"] = tie ? "true" : "false";
    if (window > 0) m["window"] = std::to_string(window);
#ifdef SACCADE_HAVE_HF
    if (arch != "llama" || !hf_config.empty()) m["hf_config"] = hf_row_config_json(*this);
#endif
  }
  return m;
}

GPTConfig GPTConfig::from_metadata(const nn::Metadata& m) {
  auto it = m.find("model");
  // a Hugging Face weights file (save_pretrained writes {"format": "pt"} and nothing of ours) is read
  // through its folder
  const auto format = m.find("format");
  SACCADE_CHECK(it != m.end() || format == m.end(),
                "GPTConfig::from_metadata: not a gpt checkpoint but a weights file as transformers saves it "
                "(metadata {{\"format\": \"{}\"}}, no \"model\"): give its folder with --hf",
                format == m.end() ? "" : format->second);
  SACCADE_CHECK(it != m.end() && it->second == "gpt",
                "GPTConfig::from_metadata: not a gpt checkpoint (metadata \"model\" is '{}')",
                it == m.end() ? "" : it->second);
  auto get = [&](const char* key) -> const std::string& {
    auto f = m.find(key);
    SACCADE_CHECK(f != m.end(), "GPTConfig::from_metadata: the checkpoint has no \"{}\"", key);
    return f->second;
  };
  GPTConfig c;
  try {
    c.vocab_size = std::stoll(get("vocab_size"));
    c.context = std::stoll(get("context"));
    c.n_layer = std::stoll(get("n_layer"));
    c.n_head = std::stoll(get("n_head"));
    c.d_model = std::stoll(get("d_model"));
    c.dropout = std::stod(get("dropout"));
  } catch (const std::logic_error& e) {  // std::invalid_argument, std::out_of_range
    SACCADE_CHECK(false, "GPTConfig::from_metadata: a malformed size in the checkpoint ({})", e.what());
  }
  c.tokenizer = get("tokenizer");
  if (auto a = m.find("activation"); a != m.end()) c.activation = a->second;  // absent: older checkpoints
  if (auto a = m.find("arch"); a != m.end()) c.arch = a->second;
  try {  // the llama fields (absent from older checkpoints: gpt2's defaults)
    if (auto a = m.find("n_kv_head"); a != m.end()) c.n_kv_head = std::stoll(a->second);
    if (auto a = m.find("rope_theta"); a != m.end()) c.rope_theta = std::stod(a->second);
    if (auto a = m.find("intermediate"); a != m.end()) c.intermediate = std::stoll(a->second);
    if (auto a = m.find("norm_eps"); a != m.end()) c.norm_eps = std::stod(a->second);
    if (auto a = m.find("window"); a != m.end()) c.window = std::stoll(a->second);
  } catch (const std::logic_error& e) {
    SACCADE_CHECK(false, "GPTConfig::from_metadata: a malformed llama field in the checkpoint ({})",
                  e.what());
  }
  if (auto a = m.find("hf_config"); a != m.end()) c.hf_config = a->second;
  if (auto a = m.find("tie"); a != m.end()) {
    SACCADE_CHECK(a->second == "true" || a->second == "false",
                  "GPTConfig::from_metadata: \"tie\" is '{}', not true or false", a->second);
    c.tie = a->second == "true";
  }
  c.check();
  return c;
}

int64_t GPTConfig::num_parameters() const {
  if (arch != "gpt2") return nn::num_parameters(llama());
  const __int128 d = d_model, n = vocab_size * __int128{1} * d + context * __int128{1} * d + 2 * d +
                                  n_layer * (12 * d * d + 13 * d);
  const bool ok = vocab_size >= 0 && context >= 0 && n_layer >= 0 && d_model >= 0 &&
                  d_model < (int64_t{1} << 31) && vocab_size < (int64_t{1} << 40) &&
                  context < (int64_t{1} << 40) && n_layer < (int64_t{1} << 40) && n <= (__int128{1} << 62);
  return ok ? static_cast<int64_t>(n) : -1;
}

GPT::GPT(const GPTConfig& config, uint64_t seed)
    : Module("GPT"), config_(config), gen_(std::make_unique<Generator>(seed)) {
  ErrorScope scope(name());
  config.check();
  const int64_t d = config.d_model;
  if (config.arch != "gpt2") {  // LlamaModel's init: every matrix N(0, 0.02²), the padding row 0
    llama_ = config.llama();
    wte = register_module(
        "wte", std::make_shared<nn::Embedding>(config.vocab_size, d, llama_.pad_token_id, gen_.get()));
    drop = register_module("drop", std::make_shared<nn::Dropout>(config.dropout, gen_.get()));
    auto list = register_module("h", std::make_shared<Module>("ModuleList"));
    for (int64_t i = 0; i < config.n_layer; ++i)
      layers.push_back(
          list->register_module(std::to_string(i), std::make_shared<nn::LlamaBlock>(llama_, gen_.get(), i)));
    norm_f = register_module("ln_f", nn::hidden_norm(llama_, "GPT"));
    if (!llama_.tie_word_embeddings)
      lm_head = register_module("lm_head", std::make_shared<nn::Linear>(d, config.vocab_size, false));
    for (auto& [n, p] : named_parameters())
      if (p.dim() >= 2) nn::init::normal_(p.data(), 0.0, 0.02, gen_.get());
    if (auto pad = wte->padding_idx()) nn::init::zeros_(wte->weight.data().select(0, *pad));
    return;
  }
  wte =
      register_module("wte", std::make_shared<nn::Embedding>(config.vocab_size, d, std::nullopt, gen_.get()));
  wpe = register_module("wpe", std::make_shared<nn::Embedding>(config.context, d, std::nullopt, gen_.get()));
  drop = register_module("drop", std::make_shared<nn::Dropout>(config.dropout, gen_.get()));
  auto list = register_module("h", std::make_shared<Module>("ModuleList"));  // children h.0, h.1, ...
  for (int64_t i = 0; i < config.n_layer; ++i)
    h.push_back(list->register_module(
        std::to_string(i), std::make_shared<nn::GPTBlock>(d, config.n_head, config.dropout, gen_.get())));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(d));
  nn::init::normal_(wte->weight.data(), 0.0, 0.02, gen_.get());
  nn::init::normal_(wpe->weight.data(), 0.0, 0.02, gen_.get());
  for (auto& b : h) {
    nn::gpt2_init_(*b, config.n_layer, gen_.get());
    if (config.activation == "gelu_new") b->mlp->gelu->set_approximate("tanh");
  }
}

void GPT::check_ids(const Tensor& idx, int64_t start) const {
  SACCADE_CHECK(idx.defined() && idx.dim() == 2 && idx.dtype() == DType::Int64,
                "GPT: expected token ids int64 (B, T), got {}", idx.defined() ? idx.shape() : Shape{});
  const int64_t T = idx.size(1);
  SACCADE_CHECK(T >= 1 && start + T <= config_.context,
                "GPT: positions [{}, {}) of ids {} pass the context of {} (crop the input to its last {} "
                "tokens)",
                start, start + T, idx.shape(), config_.context, config_.context);
}

// idx: (B, T) int64 at positions [start, start + T) -> (B, T, d)
Variable GPT::embed(const Tensor& idx, int64_t start) {
  check_ids(idx, start);
  const int64_t T = idx.size(1);
  if (!wpe) return drop->forward(nn::scale_embeddings(wte->forward(idx), llama_));  // rotary: in attention
  Tensor pos =
      ops::arange(static_cast<double>(start), static_cast<double>(start + T), 1, DType::Int64, idx.device());
  return drop->forward(wte->forward(idx) + wpe->forward(pos));
}

// x: (B, T, d) -> (B, T, V)
Variable GPT::head(const Variable& x) {
  if (!norm_f) return nn::tied_output(ln_f->forward(x), wte->weight, output_q8_0, "GPT");
  const Variable normed = norm_f->forward(x);
  return nn::scale_logits(
      lm_head ? lm_head->forward(normed) : nn::tied_output(normed, wte->weight, output_q8_0, "GPT"), llama_);
}

int64_t GPT::quantize_q8_0() {
  ErrorScope scope(name());
  int64_t n = static_cast<int64_t>(nn::quantize_q8_0(*this).size());
  if (!lm_head) output_q8_0 = ops::quantize_q8_0(wte->weight.data()), ++n;
  return n;
}

Variable GPT::forward(const Tensor& idx) {
  ErrorScope scope(name(), {nn::shape_of(idx)});
  Variable x = embed(idx, 0);
  for (auto& b : h) x = b->forward(x);
  for (auto& l : layers) x = l->forward(x, 0);
  return head(x);
}

// idx, document_ids: (B, T) -> (B, T, V)
Variable GPT::forward(const Tensor& idx, const Tensor& document_ids) {
  ErrorScope scope(name(), {nn::shape_of(idx), nn::shape_of(document_ids)});
  SACCADE_CHECK(idx.defined() && document_ids.defined() && document_ids.shape() == idx.shape(),
                "GPT: document_ids {} must have the shape of the ids {}",
                document_ids.defined() ? document_ids.shape() : Shape{},
                idx.defined() ? idx.shape() : Shape{});
  const nn::PackedDocuments docs = nn::PackedDocuments::of(document_ids, idx.device(), "GPT");
  check_ids(idx, 0);
  const Variable x0 = wte->forward(idx);  // learned positions: each document's own
  Variable x = drop->forward(wpe ? x0 + wpe->forward(docs.positions) : nn::scale_embeddings(x0, llama_));
  for (auto& b : h) x = b->forward(x, docs);
  for (auto& l : layers) x = l->forward(x, docs);
  return head(x);
}

Variable GPT::step(const Tensor& idx, State& state, int64_t logits_to_keep) {
  ErrorScope scope("GPT::step", {nn::shape_of(idx)});
  const size_t blocks = h.size() + layers.size();
  SACCADE_CHECK(state.caches.size() == blocks, "GPT::step: a state of {} caches for {} blocks",
                state.caches.size(), blocks);
  Variable x = embed(idx, state.length());
  for (size_t i = 0; i < h.size(); ++i) x = h[i]->step(x, state.caches[i]);
  for (size_t i = 0; i < layers.size(); ++i) x = layers[i]->step(x, state.caches[i]);
  return head(nn::keep_last_positions(x, logits_to_keep, "GPT::step"));
}

void GPT::set_need_weights(std::optional<bool> need) {
  for (auto& b : h) b->attn->need_weights = need;
}

std::vector<Tensor> GPT::attention_weights() const {
  SACCADE_CHECK(layers.empty(), "GPT::attention_weights: a llama model's attention keeps no weights");
  std::vector<Tensor> w;
  for (auto& b : h) w.push_back(b->attention_weights());
  return w;
}

std::vector<Variable> GPT::decayed_parameters() const {
  std::vector<Variable> out;
  for (auto& b : h)
    for (auto& [name, p] : b->named_parameters())
      if (p.dim() >= 2) out.push_back(p);
  for (auto& l : layers)
    for (auto& [name, p] : l->named_parameters())
      if (p.dim() >= 2) out.push_back(p);
  if (lm_head) out.push_back(lm_head->weight);
  return out;
}

std::vector<Variable> GPT::undecayed_parameters() const {
  std::vector<Variable> decayed = decayed_parameters(), out;
  for (const Variable& p : parameters()) {
    bool d = false;
    for (const Variable& q : decayed) d = d || q.impl() == p.impl();
    if (!d) out.push_back(p);
  }
  return out;
}

std::shared_ptr<GPT> crop_context(GPT& model, int64_t context) {
  GPTConfig c = model.config();
  SACCADE_CHECK(context >= 1 && context <= c.context, "crop_context: context {} is not in [1, {}] ({})",
                context, c.context, c.describe());
  c.context = context;
  std::shared_ptr<GPT> cropped;
  {
    nn::init::SkipInitGuard skip;  // every weight is overwritten below
    cropped = std::make_shared<GPT>(c, model.generator().seed());
  }
  nn::StateDict dict;
  for (const auto& [name, t] : model.state_dict())
    dict.insert(name, name == "wpe.weight" ? t.narrow(0, 0, context).clone() : t.clone());
  cropped->load_state_dict(dict);
  cropped->train(model.is_training());
  return cropped;
}

}  // namespace saccade::examples
