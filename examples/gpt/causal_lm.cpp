#include "examples/gpt/causal_lm.h"

#include <algorithm>
#include <type_traits>

#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/creation.h"

namespace saccade::examples {

namespace {

// Model: GPT or nn::LlamaForCausalLM (forward, step with its State, init_state).
template <class Model>
class AsLM : public CausalLM {
 public:
  AsLM(Model& m, int64_t context, int64_t vocab_size)
      : m_(m), state_(m.init_state()), context_(context), vocab_size_(vocab_size) {}
  Variable forward(const Tensor& idx) override { return m_.forward(idx); }
  Variable step(const Tensor& idx, int64_t logits_to_keep) override {
    return m_.step(idx, state_, logits_to_keep);
  }
  int64_t cached() const override { return state_.length(); }
  void reset() override { state_.reset(); }
  void reserve(int64_t positions) override { state_.reserve(positions); }
  int64_t context() const override { return context_; }
  int64_t rope_switch() const override {
    if constexpr (std::is_same_v<Model, nn::LlamaForCausalLM>) {
      const ops::RopeScaling& s = m_.config().rope_scaling;
      return s.type == ops::RopeScaling::Type::LongRope ? s.original_max_position_embeddings : 0;
    }
    return 0;
  }
  int64_t vocab_size() const override { return vocab_size_; }
  nn::Module& module() override { return m_; }

 private:
  Model& m_;
  typename Model::State state_;
  int64_t context_, vocab_size_;
};

}  // namespace

std::unique_ptr<CausalLM> as_causal_lm(GPT& model) {
  return std::make_unique<AsLM<GPT>>(model, model.config().context, model.config().vocab_size);
}

std::unique_ptr<CausalLM> as_causal_lm(nn::LlamaForCausalLM& model) {
  return std::make_unique<AsLM<nn::LlamaForCausalLM>>(model, model.config().context(),
                                                      model.config().vocab_size);
}

WindowScore score_windows(CausalLM& model, const std::vector<int64_t>& ids) {
  const int64_t N = static_cast<int64_t>(ids.size()), C = model.context(), V = model.vocab_size();
  SACCADE_CHECK(N >= 2, "score_windows: need 2 tokens or more, got {}", N);
  for (int64_t id : ids)
    SACCADE_CHECK(id >= 0 && id < V, "score_windows: token {} outside the vocabulary of {}", id, V);
  const bool was_training = model.module().is_training();
  model.module().eval();
  NoGradGuard no_grad;
  const Device device = model.device();
  WindowScore s;
  for (int64_t start = 0; start + 1 < N; start += C) {
    const int64_t len = std::min(C, N - start);
    std::vector<int64_t> window(ids.begin() + start, ids.begin() + start + len);
    const Tensor x = ops::from_vector(window, {1, len}).to(device);
    const Variable logits = reshape(model.forward(x), {len, V});
    const Tensor targets =
        ops::from_vector(std::vector<int64_t>(window.begin() + 1, window.end()), {len - 1});
    Variable loss = cross_entropy(narrow(logits, 0, 0, len - 1), targets.to(device), -100, Reduction::Sum);
    s.nats += loss.data().to(DType::Float64).to(Device::cpu()).item<double>();
    s.tokens += len - 1;
  }
  model.module().train(was_training);
  return s;
}

}  // namespace saccade::examples
