// Autocast (autograd/autocast.h): the policy table's ops give the dtypes it names, gradients reach float32
// parameters in float32 and agree with the float32 run within bfloat16's rounding, the weight cache casts a
// parameter once per guard, the guard's scope and nesting, and bad input.
#include <cmath>
#include <string>
#include <thread>
#include <tuple>

#include "helpers.h"
#include "profiler/profiler.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::randn32;

namespace {

// max |a - b| / max |b|, in float64
double rel_error(const Tensor& a, const Tensor& b) {
  Tensor d = ops::abs(ops::sub(a.to(DType::Float64), b.to(DType::Float64)));
  return ops::max(d).item<double>() /
         std::max(ops::max(ops::abs(b.to(DType::Float64))).item<double>(), 1e-30);
}

}  // namespace

TEST_CASE("autocast: a Linear runs in bfloat16, its gradients arrive in float32", "[autograd][autocast]") {
  nn::Linear f32(64, 32), half(64, 32);
  half.load_state_dict(f32.state_dict());
  const Tensor x = randn32({16, 64}, 3);
  // float32 reference
  Variable y_ref = f32.forward(Variable(x));
  sum(mul(y_ref, y_ref)).backward();
  Variable y;
  {
    AutocastGuard autocast(DType::BFloat16);
    y = half.forward(Variable(x));
    CHECK(y.dtype() == DType::BFloat16);
    Variable loss = sum(mul(y, y));  // mul stays bf16, and so does sum on the CPU (float32 on CUDA)
    CHECK(loss.dtype() == DType::BFloat16);
    loss.backward();
  }
  REQUIRE(half.weight.grad().dtype() == DType::Float32);
  REQUIRE(half.bias.grad().dtype() == DType::Float32);
  // bfloat16 keeps 8 significant bits (unit roundoff u = 2^-8): x and W are rounded once (y within ~2u of
  // the float32 y, relative to max |y|), and the backward rounds y, g = 2y and the products again: 8u
  // bounds both with room, and a float32 run is ~1e-6 off.
  const double u = 1.0 / 256;
  CHECK(rel_error(y.data(), y_ref.data()) < 2 * u);
  CHECK(rel_error(half.weight.grad(), f32.weight.grad()) < 8 * u);
  CHECK(rel_error(half.bias.grad(), f32.bias.grad()) < 8 * u);
  // and the rounding is really there (bfloat16 is not float32 under another name)
  CHECK(rel_error(y.data(), y_ref.data()) > 1e-5);
  // float64 is never cast
  nn::Linear f64(4, 2);
  f64.to(DType::Float64);
  AutocastGuard autocast(DType::BFloat16);
  CHECK(f64.forward(Variable(ops::ones({3, 4}, DType::Float64))).dtype() == DType::Float64);
}

TEST_CASE("autocast: the policy table's float32 ops give float32, cat and stack promote",
          "[autograd][autocast]") {
  const Tensor base = ops::add(ops::abs(randn32({4, 6}, 5)), 0.5);
  Variable h(base.to(DType::BFloat16), true);
  Variable w(ops::ones({6}), true), b(ops::zeros({6}), true);
  const Tensor target = ops::tensor({0, 5, 2, 1}, DType::Int64);
  AutocastGuard autocast(DType::BFloat16);
  for (AutocastPolicy p :
       {AutocastPolicy::Lower, AutocastPolicy::Float32, AutocastPolicy::Promote, AutocastPolicy::Keep}) {
    int rows = 0;
    for (const OpInfo* r : kOpTable) rows += (r->autocast_cpu == p) + (r->autocast_cuda == p);
    CHECK(rows > 0);
  }
  // PyTorch's lists: on CUDA these give float32; on the CPU only the losses do (torch.autocast("cpu")), and
  // the others run in the 16-bit dtype they are given (float32 inside the kernels); mean is on neither
  const std::vector<std::tuple<const OpInfo*, Variable, bool>> outs = {
      {&op_info::cross_entropy, cross_entropy(h, target), true},
      {&op_info::mse_loss, mse_loss(h, h), true},
      {&op_info::softmax, softmax(h, -1), false},
      {&op_info::log_softmax, log_softmax(h, -1), false},
      {&op_info::layer_norm, layer_norm(h, {6}, w, b, 1e-5), true},
      {&op_info::logsumexp, logsumexp(h, {1}, false), false},
      {&op_info::exp, exp(h), false},
      {&op_info::log, log(h), false},
      {&op_info::pow, pow(h, 2.0), false},
      {&op_info::sum, sum(h), false},
  };
  for (const auto& [row, v, on_cpu] : outs) {
    INFO(row->name);
    CHECK(autocast_policy(*row, Device::cuda()) == AutocastPolicy::Float32);
    CHECK(autocast_policy(*row, Device::cpu()) == (on_cpu ? AutocastPolicy::Float32 : AutocastPolicy::Keep));
    CHECK(v.dtype() == (on_cpu ? DType::Float32 : DType::BFloat16));
  }
  CHECK(autocast_policy(op_info::masked_softmax, Device::cuda()) == AutocastPolicy::Float32);
  CHECK(autocast_policy(op_info::masked_softmax, Device::cpu()) == AutocastPolicy::Keep);
  CHECK(autocast_policy(op_info::mean, Device::cuda()) == AutocastPolicy::Keep);
  CHECK(mean(h).dtype() == DType::BFloat16);
  CHECK(mean(Variable(base)).dtype() == DType::Float32);
  // the values are float32 math on the bf16 input, the same as casting by hand without autocast
  Variable ref;
  {
    AutocastGuard off(DType::BFloat16, /*enabled=*/false);
    CHECK(!autocast::active());
    ref = cross_entropy(h.to(DType::Float32), target);
  }
  CHECK(allclose(cross_entropy(h, target).data(), ref.data(), 0, 0));
  // gradients flow back through the cast into the bf16 leaf, in bf16
  cross_entropy(h, target).backward();
  CHECK(h.grad().dtype() == DType::BFloat16);
  // cat and stack: the widest input
  Variable f = Variable(base);
  CHECK(cat({h, f}, 0).dtype() == DType::Float32);
  CHECK(stack({h, f}, 0).dtype() == DType::Float32);
  CHECK(cat({h, h}, 0).dtype() == DType::BFloat16);
  // ops outside the table keep their inputs' dtype
  CHECK(gelu(h).dtype() == DType::BFloat16);
}

TEST_CASE("autocast: the weight cache casts a parameter once per guard", "[autograd][autocast]") {
  nn::Linear lin(8, 8);
  Variable x(randn32({2, 8}, 7));
  autocast::reset_weight_cache_casts();
  {
    AutocastGuard autocast(DType::BFloat16);
    Variable y = lin.forward(x);
    for (int i = 0; i < 3; ++i) y = lin.forward(y);  // four uses of weight and bias
    CHECK(autocast::weight_cache_casts() == 2);
    sum(y).backward();
    CHECK(lin.weight.grad().dtype() == DType::Float32);
    // a cast's node saves nothing, so a backward does not spend it: the next forward reuses it
    Variable z = lin.forward(lin.forward(x));
    CHECK(autocast::weight_cache_casts() == 2);
    // a parameter modified in place (an optimizer step) is cast again: its storage version moved
    {
      NoGradGuard no_grad;
      Tensor w = lin.weight.data();
      ops::mul_(w, 0.5);
    }
    z = lin.forward(x);
    CHECK(autocast::weight_cache_casts() == 3);
    // while the parameters are unchanged, the cache serves them
    lin.forward(x);
    CHECK(autocast::weight_cache_casts() == 3);
    // a cast made under no_grad carries no history: a recorded forward casts again
    {
      NoGradGuard no_grad;
      Tensor w = lin.weight.data();
      ops::mul_(w, 2.0);
      lin.forward(x);
    }
    CHECK(autocast::weight_cache_casts() == 4);
    lin.forward(x);
    CHECK(autocast::weight_cache_casts() == 5);
  }
  {
    AutocastGuard autocast(DType::BFloat16);  // a new guard: a new cache
    lin.forward(x);
    CHECK(autocast::weight_cache_casts() == 7);
  }
}

TEST_CASE("autocast: two separate backwards through graphs that share a cached cast (issue 37, 2)",
          "[autograd][autocast]") {
  // One cached cast node serves both graphs; the first backward released it, and the second threw "its
  // saved tensors were already freed" (a cast saves nothing: PyTorch's ToCopyBackward0 runs twice).
  nn::Linear lin(8, 4), ref(8, 4);
  ref.load_state_dict(lin.state_dict());
  const Tensor x1 = randn32({3, 8}, 1), x2 = randn32({5, 8}, 2);
  Tensor after_first;
  {
    AutocastGuard autocast(DType::BFloat16);
    Variable l1 = sum(lin.forward(Variable(x1))), l2 = sum(lin.forward(Variable(x2)));
    l1.backward();
    after_first = lin.weight.grad().clone();
    l2.backward();
  }
  // the same two losses built in two guards (two casts of each parameter, no sharing)
  Variable m1, m2;
  {
    AutocastGuard autocast(DType::BFloat16);
    m1 = sum(ref.forward(Variable(x1)));
  }
  {
    AutocastGuard autocast(DType::BFloat16);
    m2 = sum(ref.forward(Variable(x2)));
  }
  m1.backward();
  REQUIRE(saccade::testing::allclose(after_first, ref.weight.grad(), 0, 0));
  m2.backward();
  REQUIRE(saccade::testing::allclose(lin.weight.grad(), ref.weight.grad(), 0, 0));
  REQUIRE(saccade::testing::allclose(lin.bias.grad(), ref.bias.grad(), 0, 0));
  CHECK(ops::max(ops::abs(ops::sub(lin.weight.grad(), after_first))).item<double>() > 0.1);
}

TEST_CASE("autocast: a fused optimizer step inside a long guard refreshes the casts (issue 37, 3)",
          "[autograd][autocast][optim]") {
  // The fused AdamW step wrote the parameters without bumping their version: an evaluation inside the same
  // guard read the casts of the weights before the step.
  nn::Linear lin(8, 8);
  const Tensor x = randn32({4, 8}, 3);
  nn::AdamW opt(lin.parameters(), {1e-1, 0.9, 0.999, 1e-8, 0.1});
  REQUIRE(opt.options().fused);
  auto eval = [&] {
    NoGradGuard no_grad;
    return lin.forward(Variable(x)).data().to(DType::Float32);
  };
  Tensor before, inside;
  {
    AutocastGuard autocast(DType::BFloat16);
    before = eval();
    for (int i = 0; i < 3; ++i) {
      opt.zero_grad();
      sum(mul(lin.forward(Variable(x)), lin.forward(Variable(x)))).backward();
      opt.step();
    }
    inside = eval();
  }
  AutocastGuard fresh_guard(DType::BFloat16);  // a new guard: a new cache
  const Tensor fresh = eval();
  CHECK(ops::max(ops::abs(ops::sub(inside, before))).item<double>() > 0.05);
  REQUIRE(saccade::testing::allclose(inside, fresh, 0, 0));
}

TEST_CASE("autocast: the profiler's range of a redispatched op is closed once (issue 37)",
          "[autograd][autocast][profiler]") {
  // an op's OpScope opens its range, and autocast's redispatch calls the op again, which opens a second
  // one: make_result closes only that one, and the first must not stay open (nor its NVTX range with it).
  nn::Linear lin(8, 8);
  const Tensor x = randn32({4, 8}, 3);
  profiler::Profile prof;
  const size_t open_before = profiler::detail::open_ops();
  {
    AutocastGuard autocast(DType::BFloat16);
    Variable y = lin.forward(Variable(x));
    y = softmax(y, -1);
    CHECK(profiler::detail::open_ops() == open_before);
    CHECK(std::string(profiler::detail::current_range()).empty());  // was "linear"
  }
  prof.stop();
  int linear = 0;
  for (const profiler::Event& e : prof.events()) linear += e.name == std::string("linear");
  CHECK(linear == 1);
}

TEST_CASE("autocast: guard scope, threads and bad input", "[autograd][autocast]") {
  CHECK(!autocast_enabled());
  REQUIRE_THROWS_SACCADE(AutocastGuard(DType::Float32),
                         "AutocastGuard: expected bfloat16 or float16, got float32");
  REQUIRE_THROWS_SACCADE(AutocastGuard(DType::Float64), "got float64");
  REQUIRE_THROWS_SACCADE(AutocastGuard(DType::Int64), "got int64");
  CHECK(!autocast_enabled());
  CHECK(autocast_policy(op_info::relu, Device::cpu()) == AutocastPolicy::Keep);  // on no list of PyTorch's
  {
    AutocastGuard outer(DType::Float16);
    CHECK(autocast_enabled());
    CHECK(autocast_dtype() == DType::Float16);
    {
      AutocastGuard inner(DType::BFloat16);
      CHECK(autocast_dtype() == DType::BFloat16);
    }
    CHECK(autocast_dtype() == DType::Float16);
    bool other_thread = true;
    std::thread([&] { other_thread = autocast_enabled(); }).join();
    CHECK(!other_thread);  // thread-local, as NoGradGuard
  }
  CHECK(!autocast_enabled());
}

TEST_CASE(
    "autocast: attention's q, k and v meet in 16 bits, as torch.autocast's scaled_dot_product_attention",
    "[autograd][autocast]") {
  // A float32 q and k (out of a norm, on autocast's float32 list) beside a bfloat16 v: each is cast as the
  // fused kernel's row says before any check, so the result is that of three bfloat16 inputs, bit for bit.
  const Tensor q = randn32({2, 4, 6, 8}, 1), k = randn32({2, 2, 6, 8}, 2);
  const Tensor v = randn32({2, 2, 6, 8}, 3).to(DType::BFloat16);
  AttentionOptions o;
  o.is_causal = true, o.enable_gqa = true;
  REQUIRE_THROWS_SACCADE(scaled_dot_product_attention(Variable(q), Variable(k), Variable(v), o),
                         "q, k and v must have one float dtype, got float32, float32, bfloat16");
  for (const bool softcap : {false, true}) {
    if (softcap) o.softcap = 2.0;  // the composed path: the scores' matmul casts them instead
    Variable qv(q, true);
    Tensor mixed, lowered;
    {
      AutocastGuard autocast(DType::BFloat16);
      const Variable y = scaled_dot_product_attention(qv, Variable(k), Variable(v), o).output;
      CHECK(y.dtype() == DType::BFloat16);
      mixed = y.data();
      sum(y).backward();
      lowered = scaled_dot_product_attention(Variable(q.to(DType::BFloat16)), Variable(k.to(DType::BFloat16)),
                                             Variable(v), o)
                    .output.data();
    }
    CHECK(allclose(mixed, lowered, 0, 0));  // bit for bit
    REQUIRE(qv.grad().defined());
    CHECK(qv.grad().dtype() == DType::Float32);  // through the recorded cast, to the float32 input
  }
}

TEST_CASE("autocast: Llama blocks with q and k norms and sparse MLPs train under bfloat16 autocast",
          "[autograd][autocast]") {
  // OLMo 2 / OLMoE's full-width q and k norms and Qwen3's per-head ones put float32 queries and keys beside
  // autocast's bfloat16 values; the experts' grouped products run in bfloat16. Against the float32 model.
  for (const bool full_width : {false, true}) {
    nn::LlamaConfig c;
    c.vocab_size = 64, c.hidden_size = 32, c.intermediate_size = 48, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 16;
    (full_width ? c.qk_norm_full_width : c.qk_norm) = true;
    c.num_experts = 4, c.num_experts_per_tok = 2, c.norm_topk_prob = !full_width;
    nn::LlamaForCausalLM model(c, 5);
    Tensor idx = ops::empty({2, 8}, DType::Int64);
    for (int64_t i = 0; i < idx.numel(); ++i) idx.data<int64_t>()[i] = (i * 7 + 3) % c.vocab_size;
    const Tensor ref = model.forward(idx).data();
    Variable z;
    {
      AutocastGuard autocast(DType::BFloat16);
      z = model.forward(idx);
      sum(mul(z, z)).backward();
    }
    CHECK(rel_error(z.data(), ref) < 0.03);
    for (const auto& [name, p] : model.named_parameters()) {
      INFO(name);
      REQUIRE(p.grad().defined());
      CHECK(p.grad().dtype() == DType::Float32);
      CHECK(std::isfinite(ops::max(ops::abs(p.grad())).item<double>()));
    }
  }
}
