#pragma once
// What tests/test_hf_gpt2.cpp, test_hf_llama.cpp and the PEFT tests share: the fixture files written by
// transformers (tests/fixtures/make_hf_gpt2.py, make_hf_llama.py, make_hf_peft.py) and llm.c's training
// check.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>

#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "helpers.h"
#include "nn/optim.h"
#include "nn/serialization.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace saccade::testing {

/// tests/data/`name`: a fixture file or folder.
inline std::string hf_data(const std::string& name) {
  std::string path =
      SACCADE_TEST_DATA_DIR;  // appended, not `+`: GCC 12's -Warray-bounds misfires on the latter
  path += '/';
  path += name;
  return path;
}

/// The whole of the file `path`, as bytes.
inline std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

/// Trains `params` of `model` (logits = model.forward(ids (B, T)) of shape (B, T, V)) with AdamW (`lr`,
/// `weight_decay` on every parameter, as the fixture scripts' torch.optim.AdamW) on expected's "batch"
/// (inputs batch[:, :-1], targets batch[:, 1:]) for as many steps as expected's "losses" (float32) has,
/// checking each step's mean cross-entropy against transformers' to `rel` relative (1e-5).
template <class Model>
void check_adamw_losses(Model& model, const std::vector<Variable>& params, double lr, double weight_decay,
                        const nn::Safetensors& expected, int64_t vocab_size, double rel = 1e-5) {
  model.train();
  const Tensor& batch = expected.tensors.at("batch");
  const Tensor inputs = batch.narrow(1, 0, batch.size(1) - 1).contiguous();
  const Tensor targets = batch.narrow(1, 1, batch.size(1) - 1).contiguous().reshape({-1});
  nn::AdamOptions o;
  o.lr = lr, o.weight_decay = weight_decay;
  nn::AdamW opt(params, o);
  const Tensor& losses = expected.tensors.at("losses");
  for (int64_t step = 0; step < losses.numel(); ++step) {
    Variable loss = cross_entropy(reshape(model.forward(inputs), {-1, vocab_size}), targets);
    CAPTURE(step);
    CHECK(loss.data().template item<float>() == Approx(losses.data<float>()[step]).epsilon(rel));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
}

/// check_adamw_losses of every parameter, lr 1e-3, weight decay 0.1 (make_hf_gpt2.py's and make_hf_llama.py's
/// full fine-tuning).
template <class Model>
void check_adamw_losses(Model& model, const nn::Safetensors& expected, int64_t vocab_size) {
  check_adamw_losses(model, model.parameters(), 1e-3, 0.1, expected, vocab_size);
}

/// Every "trained.<PEFT name>" factor of expected (make_hf_peft.py: PEFT's factors after its AdamW steps)
/// equals the tensor of that name in the adapter file `saved` (hf::save_adapter's), to 1e-4 relative and
/// `abs` (5e-5) absolute, and the file holds no other tensor. (Absolute: AdamW at lr 1e-2 moves a factor
/// whose gradient is near zero by up to lr a step whatever its size, so float32 sums in another order than
/// PyTorch's, the cross-entropy's row sums for one, differ there by more than their rounding: 1.2e-5 seen at
/// GPT-2's.)
inline void check_trained_factors(const nn::Safetensors& expected, const std::string& saved,
                                  double abs = 5e-5) {
  const nn::Safetensors ours = nn::load_safetensors(saved);
  size_t compared = 0;
  for (const auto& [name, t] : expected.tensors) {
    if (!name.starts_with("trained.")) continue;
    const Tensor& got = ours.tensors.at(name.substr(8));
    INFO(name << ": max |ours - PEFT's| " << ops::max(ops::abs(ops::sub(got, t))).item<float>()
              << ", max |PEFT's| " << ops::max(ops::abs(t)).item<float>());
    CHECK(allclose(got, t, 1e-4, abs));
    ++compared;
  }
  CHECK(compared == ours.tensors.size());
}

}  // namespace saccade::testing
