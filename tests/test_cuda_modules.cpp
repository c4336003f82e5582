// The CUDA backend at the level of modules, models and files, and its pinned host<->device staging:
//  - [staging]: the double-buffered chunk loop of ops/cuda/staging.h over a fake engine that runs its queued
//    copies only when they are waited for (as a stream would, late). Plain C++: runs in every build.
//  - [cuda]: modules (MultiHeadAttention in torch's layout, fused and with weights, GRU, LayerNorm,
//  Embedding) and one training
//    step of the sat captioner (loss, every gradient, the parameters after clip + Adam) on the GPU against
//    the same model on the CPU (built on the CPU, copied with .to()); checkpoints saved on one device and
//    loaded on the other; modules fed tensors of another device throw. Without a GPU the CPU half of each
//    comparison runs (the checkpoint test in full, with the CPU as "the other device") and the test warns and
//    passes.
#include <unistd.h>
#include <filesystem>
#include <map>
#include <memory>

#include "cuda_helpers.h"
#include "nn/embedding.h"
#include "nn/multihead.h"
#include "nn/normalization.h"
#include "nn/optim.h"
#include "nn/rnn.h"
#include "nn/serialization.h"
#include "ops/cuda/staging.h"
#ifdef SACCADE_HAVE_CAPTION
#include "examples/common/scenes.h"
#include "examples/image_caption/captioner.h"
#endif

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::both;
using saccade::testing::kCpu;
using saccade::testing::kGpu;
using saccade::testing::randn;

namespace {

// ---- a stream, faked: queued copies run late ----

// "Device memory" is host memory here. Copies are queued and run only when wait() reaches the event
// recorded after them, or at synchronize(): a staging loop that refilled a pinned buffer before waiting for
// the copy that reads it would send the new bytes, not the old, and the test would see them.
class LateEngine final : public cuda::StagingEngine {
 public:
  explicit LateEngine(size_t chunk) : buffers_{std::vector<char>(chunk), std::vector<char>(chunk)} {}

  void async_to_device(void* dst, int slot, size_t n) override {
    REQUIRE(n <= buffers_[slot].size());
    queue_.push_back([this, dst, slot, n] { std::memcpy(dst, buffers_[slot].data(), n); });
    ++copies;
  }
  void async_to_host(int slot, const void* src, size_t n) override {
    REQUIRE(n <= buffers_[slot].size());
    queue_.push_back([this, src, slot, n] { std::memcpy(buffers_[slot].data(), src, n); });
    ++copies;
  }
  void record(int slot) override { event_[slot] = queue_.size() + done_; }
  void wait(int slot) override { run_until(event_[slot]); }
  void synchronize() override { run_until(done_ + queue_.size()); }
  char* buffer(int slot) override { return buffers_[slot].data(); }

  int copies = 0;
  size_t max_queued = 0;  // the most copies ever waiting at once

 private:
  void run_until(size_t count) {  // runs the queued copies up to the count-th ever queued
    max_queued = std::max(max_queued, queue_.size());
    while (done_ < count && !queue_.empty()) {
      queue_.front()();
      queue_.erase(queue_.begin());
      ++done_;
    }
  }
  std::vector<char> buffers_[2];
  std::vector<std::function<void()>> queue_;
  size_t done_ = 0;
  size_t event_[2] = {0, 0};
};

std::vector<char> pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + seed * 17 + i / 7) & 0xff);
  return v;
}

}  // namespace

TEST_CASE("pinned staging: chunked, double-buffered copies arrive whole, in both directions", "[staging]") {
  const size_t chunk = 64;
  for (size_t n : {size_t{0}, size_t{1}, chunk - 1, chunk, chunk + 1, 2 * chunk, 5 * chunk + 7, 64 * chunk}) {
    INFO("bytes " << n);
    const std::vector<char> src = pattern(n, 1);
    std::vector<char> dev(n, 0), back(n, 0);
    LateEngine e(chunk);
    cuda::staged_copy_from_host(e, dev.data(), src.data(), n, chunk);
    CHECK(dev == src);
    CHECK(e.copies == static_cast<int>((n + chunk - 1) / chunk));
    cuda::staged_copy_to_host(e, back.data(), dev.data(), n, chunk);
    CHECK(back == src);
    CHECK(e.copies == 2 * static_cast<int>((n + chunk - 1) / chunk));
    if (n > 2 * chunk) CHECK(e.max_queued >= 2);  // the two buffers really were in flight together
  }
}

TEST_CASE("pinned staging: the thresholds and sizes are what the backend documents", "[staging]") {
  // copies below 1 MiB stay pageable; two 4 MiB pinned buffers (8 MiB of page-locked host memory in all)
  CHECK(cuda::kStagingThreshold == (size_t{1} << 20));
  CHECK(cuda::kStagingChunk == (size_t{4} << 20));
  CHECK(cuda::kStagingChunk >= cuda::kStagingThreshold);
}

// ---- modules ----

TEST_CASE(
    "cuda: MultiHeadAttention in torch's layout (fused and with weights), GRU, LayerNorm, Embedding agree "
    "with the CPU",
    "[cuda]") {
  Tensor x = randn({3, 6, 16}, 60), kv = randn({3, 9, 16}, 61);
  Tensor pad = ops::gt(ops::arange(9, DType::Int64).reshape({1, 9}),
                       ops::tensor({8, 4, 6}, DType::Int64).reshape({3, 1}));  // true = padding
  Tensor ids = ops::tensor({1, 0, 5, 7, 7, 2, 0, 3}, DType::Int64).reshape({2, 4});
  // out (and the weights), then every parameter's and every input's gradient of sum(out ⊙ R)
  auto grads_of = [](nn::Module& m, const Variable& out, const std::vector<Variable>& inputs, uint64_t seed) {
    Tensor r = randn(out.shape(), seed).to(out.device());
    sum(mul(out, Variable(r))).backward();
    std::vector<Tensor> res{out.data()};
    for (const Variable& p : m.parameters()) res.push_back(p.grad());
    for (const Variable& v : inputs) res.push_back(v.grad());
    return res;
  };
  for (bool need_weights : {false, true}) {
    INFO("MultiHeadAttention (Packed), need_weights " << need_weights);
    both(
        [&](Device d) {
          Generator g(62);
          nn::MultiHeadAttention mha(16, 4,
                                     {.bias = true, .layout = nn::ParameterLayout::Packed, .generator = &g});
          mha.to(d);
          Variable q(x.to(d), true), k(kv.to(d), true);
          auto o = mha.forward(q, k, k, {.key_padding_mask = pad.to(d), .need_weights = need_weights});
          std::vector<Tensor> res = grads_of(mha, o.output, {q, k}, 63);
          res.push_back(need_weights ? o.weights.data() : Tensor());
          return res;
        },
        1e-4);
  }
  INFO("GRU, 2 layers, bidirectional, ragged lengths");
  both(
      [&](Device d) {
        Generator g(64);
        nn::GRU gru(16, 8, nn::GRUOptions{.num_layers = 2, .bidirectional = true}, &g);
        gru.to(d);
        Variable in(x.to(d), true);
        auto o = gru.forward(in, Variable(), ops::tensor({6, 2, 4}, DType::Int64).to(d));
        std::vector<Tensor> res = grads_of(gru, o.output, {in}, 65);
        res.push_back(o.h_n.data());
        return res;
      },
      1e-4);
  INFO("LayerNorm and Embedding (padding_idx 0)");
  both(
      [&](Device d) {
        nn::LayerNorm ln(16);
        Generator g(66);
        nn::Embedding emb(8, 16, 0, &g);
        ln.to(d), emb.to(d);
        Variable in(x.to(d), true);
        std::vector<Tensor> res = grads_of(ln, ln.forward(in), {in}, 67);
        for (const Tensor& t : grads_of(emb, emb.forward(Variable(ids.to(d))), {}, 68)) res.push_back(t);
        return res;
      },
      1e-5);
  INFO("LayerNorm over many rows (the two-stage weight and bias gradients: 4099 rows, 3 chunks of columns)");
  both(
      [&](Device d) {
        nn::LayerNorm ln(70);
        ln.to(d);
        Variable in(testing::randn({4099, 70}, 69).to(d), true);
        return grads_of(ln, ln.forward(in), {in}, 70);
      },
      2e-3);           // float32 sums over 4099 rows in another order
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

#ifdef SACCADE_HAVE_CAPTION
TEST_CASE("cuda: one training step of the sat captioner agrees with the CPU (loss, gradients, Adam)",
          "[cuda][caption]") {
  namespace ex = saccade::examples;
  Generator gen(70);
  const int64_t batch = 8, steps = 6;
  Tensor images = ops::rand({batch, 1, 56, 56}, DType::Float32, kCpu, &gen);
  Tensor tokens = ops::randint(0, ex::Vocab().size(), {batch, steps + 1}, kCpu, &gen);
  Tensor input = tokens.narrow(1, 0, steps).contiguous();
  Tensor target = tokens.narrow(1, 1, steps).contiguous().reshape({-1});
  // the loss, every gradient, then every parameter after gradient clipping and one Adam step
  both(
      [&](Device d) {
        auto model = ex::make_captioner(ex::CaptionConfig::defaults("sat"), 0);
        model->to(d);
        std::vector<Variable> params = model->parameters();
        nn::Adam adam(params, nn::AdamOptions{.lr = 3e-3});
        Variable logits = model->decode(model->encode(images.to(d)), input.to(d));
        Variable loss =
            cross_entropy(reshape(logits, {-1, ex::Vocab().size()}), target.to(d), ex::Vocab::kPad);
        loss.backward();
        std::vector<Tensor> res{loss.data()};
        for (const Variable& p : params) res.push_back(p.grad().clone());
        nn::clip_grad_norm_(params, 1.0);
        adam.step();
        for (const Variable& p : params) res.push_back(p.data());
        return res;
      },
      5e-4);
  SKIP_WITHOUT_GPU();
}
#endif

// ---- checkpoints across devices ----

namespace {

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name)
      : path((std::filesystem::temp_directory_path() / fmt::format("saccade_cuda_{}_{}", ::getpid(), name))
                 .string()) {}
  ~TempFile() { std::filesystem::remove(path); }
};

// A GRU and its Adam, built on the CPU from `seed`, moved to `d`, after one training step there (gradients
// dropped after it).
struct Trained {
  std::unique_ptr<nn::GRU> gru;
  std::unique_ptr<nn::Adam> adam;
  Trained(uint64_t seed, Device d, bool step) {
    Generator g(seed);
    gru = std::make_unique<nn::GRU>(5, 4, nn::GRUOptions{}, &g);
    gru->to(d);
    adam = std::make_unique<nn::Adam>(gru->parameters(), nn::AdamOptions{.lr = 0.01});
    if (!step) return;
    sum(gru->forward(Variable(randn({2, 3, 5}, seed + 1).to(d))).output).backward();
    adam->step();
    gru->zero_grad();
  }
};

// Every tensor of a state dict, copied to the CPU.
std::map<std::string, Tensor> on_cpu(const nn::StateDict& s) {
  std::map<std::string, Tensor> out;
  for (const auto& [k, t] : s) out[k] = t.to(kCpu);
  return out;
}

void check_on(const nn::StateDict& s, Device d) {
  for (const auto& [k, t] : s) {
    INFO(k);
    CHECK(t.device() == d);
  }
}

// Equal within tol (0 by default, bitwise: a checkpoint copies bytes, it computes nothing).
void check_same(const nn::StateDict& a, const nn::StateDict& b, double tol = 0) {
  auto x = on_cpu(a), y = on_cpu(b);
  REQUIRE(x.size() == y.size());
  for (const auto& [k, t] : x) {
    INFO(k);
    REQUIRE(y.count(k) == 1);
    CHECK(allclose(t, y.at(k), tol, tol));
  }
}

}  // namespace

TEST_CASE("cuda: a checkpoint saved on the GPU loads on the CPU and back, optimizer state included",
          "[cuda][checkpoint]") {
  // Without a GPU, "the other device" is the CPU: the same code runs, the device checks hold trivially.
  const Device other = cuda_is_available() ? kGpu : kCpu;
  TempFile model_file("model.safetensors"), ckpt_file("ckpt.safetensors");

  Trained src(80, other, /*step=*/true);
  nn::save(*src.gru, model_file.path);
  nn::save_checkpoint(ckpt_file.path, *src.gru, *src.adam, 1);

  // to the CPU: a model and an optimizer made there
  Trained cpu(81, kCpu, false);
  nn::load(*cpu.gru, model_file.path);
  check_same(cpu.gru->state_dict(), src.gru->state_dict());
  check_on(cpu.gru->state_dict(), kCpu);
  Trained cpu2(82, kCpu, false);
  CHECK(nn::load_checkpoint(ckpt_file.path, *cpu2.gru, *cpu2.adam).step == 1);
  check_same(cpu2.gru->state_dict(), src.gru->state_dict());
  check_same(cpu2.adam->state_dict(), src.adam->state_dict());
  check_on(cpu2.adam->state_dict(), kCpu);

  // and back: a checkpoint saved from the CPU model loads into a model on the other device, staying there
  TempFile back_file("back.safetensors");
  nn::save_checkpoint(back_file.path, *cpu2.gru, *cpu2.adam, 2);
  Trained dev(83, other, false);
  CHECK(nn::load_checkpoint(back_file.path, *dev.gru, *dev.adam).step == 2);
  check_same(dev.gru->state_dict(), src.gru->state_dict());
  check_on(dev.gru->state_dict(), other);
  for (const auto& [k, t] : dev.adam->state_dict()) {
    INFO(k);  // per-parameter moments live beside their parameter; steps and hyper-parameters on the CPU
    const bool moment = k.find("exp_avg") != std::string::npos;
    CHECK(t.device() == (moment ? other : kCpu));
  }
  // training goes on on the other device from the loaded state exactly as from the source's
  for (Trained* t : {&src, &dev}) {
    sum(t->gru->forward(Variable(randn({2, 3, 5}, 84).to(other))).output).backward();
    t->adam->step();
  }
  check_same(dev.gru->state_dict(), src.gru->state_dict(), 1e-6);  // the GPU's float sums may reorder
  SKIP_WITHOUT_GPU();
}

TEST_CASE("cuda: modules and losses fed tensors of another device throw a clear error", "[cuda]") {
  SKIP_WITHOUT_GPU();
  Generator g(90);
  nn::GRU gru(5, 4, nn::GRUOptions{}, &g);  // on the CPU
  REQUIRE_THROWS_SACCADE(gru.forward(Variable(randn({2, 3, 5}, 91).to(kGpu))), "device");
  nn::MultiHeadAttention mha(8, 2, {.bias = true, .layout = nn::ParameterLayout::Packed, .generator = &g});
  mha.to(kGpu);
  Variable x(randn({2, 3, 8}, 92));  // on the CPU
  REQUIRE_THROWS_SACCADE(mha.forward(x, x, x), "device");
  REQUIRE_THROWS_SACCADE(mha.forward(Variable(x.data().to(kGpu)), x, x), "device");
  Variable logits(randn({4, 3}, 93).to(kGpu), true);
  REQUIRE_THROWS_SACCADE(cross_entropy(logits, ops::tensor({0, 1, 2, 0}, DType::Int64)), "device");
}
