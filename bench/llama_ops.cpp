// Llama's memory-bound ops on the CPU (issue 40, goal 2): forward + backward, through autograd from a fixed
// random output gradient, of
//   - rms_norm(x, {cols}, weight, 1e-6) on x (rows, cols) (Zhang & Sennrich 2019) against torch.nn.RMSNorm;
//   - rotary_embedding(x, cos, sin, Half) on x (1, cols / 64, rows, 64): rows positions of cols / 64 heads of
//     64 dims, theta 10000 (Su et al. 2021; the tables computed once, as the model's cache does) against the
//     rotate-half formula as transformers' modeling_llama writes it, x * cos + rotate_half(x) * sin, its
//     (rows, 64) tables computed once in x's dtype;
//   - swiglu(gate, up) on (rows, cols) each (Shazeer 2020) against F.silu(gate) * up;
// at (rows, cols) = (8192, 1024), float32 and bfloat16, 2 threads, against PyTorch eager
// (bench/llama_ops_torch.py; its defaults and OMP_WAIT_POLICY=PASSIVE, the better shown) and against a plain
// copy of the same bytes: memcpy of half the op's bytes from one buffer into another (so it reads and
// writes as many bytes as the op must), split over the same threads by saccade's pool. The op's bytes are
// what forward + backward must read and write at the least: every input, output and gradient once
// (rms_norm: x, y forward; dy, x, dx backward, 5 tensors; rotary: 4, plus the tables; swiglu: gate, up, y
// forward; dy, gate, up, dgate, dup backward, 8). All four alternate run by run. Cells: median ms
// [min-max] of `samples` runs and GB/s = the op's bytes / median time, for all four columns alike.
//
// Usage: build/bench/llama_ops [samples] [f32|bf16|both] [threads] [rows] [cols]   (default 10 both 2 8192
//        1024; cols a multiple of 64; `llama_ops 1 both 2 256 128` is a smoke run)
//        build/bench/llama_ops --check   (small float32 cases against PyTorch: outputs and gradients)
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/torch_check.h"
#include "ops/cpu/thread_pool.h"
#include "saccade.h"

using namespace saccade;
namespace sb = saccade::bench;

namespace {

enum class Op { RmsNorm, Rope, Swiglu };
constexpr Op kOps[] = {Op::RmsNorm, Op::Rope, Op::Swiglu};
constexpr int64_t kHeadDim = 64;  // rotary: (8192, 1024) as 16 heads of 64 dims at 8192 positions
constexpr double kEps = 1e-6, kTheta = 10000;

// The name the torch twin knows the op by.
const char* op_name(Op op) { return op == Op::RmsNorm ? "rms_norm" : op == Op::Rope ? "rope" : "swiglu"; }

// One op's forward + backward on random inputs of one dtype: a (and b: rms_norm's weight, swiglu's up).
struct OpCase {
  Op op;
  int64_t rows, cols;
  Variable a, b, g;  // g: the output gradient
  Tensor cos, sin;   // rope: (rows, 32) float32

  OpCase(Op o, int64_t r, int64_t c, DType dt) : op(o), rows(r), cols(c) {
    Generator gen(0);
    auto randn = [&](const Shape& s) { return ops::randn(s, DType::Float32, Device::cpu(), &gen).to(dt); };
    const Shape shape = op == Op::Rope ? Shape{1, cols / kHeadDim, rows, kHeadDim} : Shape{rows, cols};
    a = Variable(randn(shape), true);
    if (op != Op::Rope) b = Variable(randn(op == Op::RmsNorm ? Shape{cols} : shape), true);
    g = Variable(randn(shape));
    if (op == Op::Rope) {
      ops::RotaryTables t = ops::rotary_tables(rows, kHeadDim, kTheta);
      cos = t.cos, sin = t.sin;
    }
  }
  Variable forward() const {
    switch (op) {
      case Op::RmsNorm:
        return rms_norm(a, {cols}, b, kEps);
      case Op::Rope:
        return rotary_embedding(a, cos, sin, RotaryStyle::Half);
      case Op::Swiglu:
        break;
    }
    return swiglu(a, b);
  }
  void run() {
    forward().backward(g);
    a.zero_grad();
    if (b.defined()) b.zero_grad();
  }
  // Bytes forward + backward must read and write at the least (see the file comment).
  double bytes() const {
    const double n = double(rows) * cols * a.data().itemsize(), row = double(cols) * a.data().itemsize();
    switch (op) {
      case Op::RmsNorm:  // + weight read twice, its gradient written, rstd written and read
        return 5 * n + 3 * row + 2.0 * rows * 4;
      case Op::Rope:  // + cos and sin (rows, 32) float32, read forward and backward
        return 4 * n + 2 * 2.0 * rows * (kHeadDim / 2) * 4;
      case Op::Swiglu:
        break;
    }
    return 8 * n;
  }
};

// memcpy of `bytes` from one buffer into another, split over saccade's pool (the threads the ops use).
struct CopyCase {
  std::vector<unsigned char> src, dst;
  explicit CopyCase(size_t bytes) : src(bytes, 1), dst(bytes, 0) {}
  void run() {
    cpu::parallel_for(0, int64_t(src.size()), int64_t{1} << 20, [&](int64_t b, int64_t e) {
      std::memcpy(dst.data() + b, src.data() + b, size_t(e - b));
    });
  }
};

// "median [min-max] GB/s" of ms samples moving `bytes`.
std::string cell(const std::vector<double>& ms, double bytes, const char* tag = "") {
  const sb::Stats st = sb::stats(ms);
  return fmt::format("{:.2f} [{:.2f}-{:.2f}] {:.1f}{}", st.median, st.min, st.max,
                     bytes / (st.median * 1e-3) / 1e9, tag);
}

void table(sb::TorchPair& torch, DType dt, int samples, int64_t rows, int64_t cols, int threads) {
  std::printf("\n%s, (rows, cols) = (%lld, %lld), %d thread(s), %d runs alternating; forward + backward\n",
              std::string(dtype_name(dt)).c_str(), (long long)rows, (long long)cols, threads, samples);
  std::printf("%-9s %-7s %-25s %-27s %-25s %-10s %s\n", "op", "MB", "ours ms [min-max] GB/s",
              "torch ms [min-max] GB/s", "copy ms [min-max] GB/s", "torch/ours", "ours/copy");
  for (Op op : kOps) {
    OpCase ours(op, rows, cols, dt);
    CopyCase copy(size_t(ours.bytes() / 2));
    const std::string request = fmt::format("op {} {} {} {} {}", op_name(op),
                                            dt == DType::BFloat16 ? "bf16" : "f32", rows, cols, threads);
    ours.run(), copy.run(), torch.warm_up(request);  // warm-up, all sides
    torch.clear();
    std::vector<double> ms[2];  // ours, copy
    for (int i = 0; i < samples; ++i) {
      ms[0].push_back(sb::ms_of([&] { ours.run(); }));
      ms[1].push_back(sb::ms_of([&] { copy.run(); }));
      torch.run(request);
    }
    const double bytes = ours.bytes(), ours_med = sb::stats(ms[0]).median;
    const char* tag = "";
    const std::vector<double>& theirs = torch.best(&tag);
    std::printf("%-9s %-7.1f %-25s %-27s %-25s %-10s %.2f\n", op_name(op), bytes / 1e6,
                cell(ms[0], bytes).c_str(), torch.answered() ? cell(theirs, bytes, tag).c_str() : "-",
                cell(ms[1], bytes).c_str(),
                torch.answered() ? fmt::format("{:.2f}", sb::stats(theirs).median / ours_med).c_str() : "-",
                ours_med / sb::stats(ms[1]).median);
    std::fflush(stdout);
  }
}

// Each op's output and gradients against PyTorch's on small float32 cases (rows not a multiple of anything).
int check_mode() {
  const int64_t rows = 77, cols = 128;
  bool ok = true;
  for (Op op : kOps) {
    OpCase c(op, rows, cols, DType::Float32);
    Variable out = c.forward();
    out.backward(c.g);
    sb::NamedTensors inputs = {{"a", c.a.data()}, {"g", c.g.data()}},
                     outputs = {{"out", out.data()}, {"da", c.a.grad()}};
    if (op == Op::Rope) inputs.push_back({"cos", c.cos}), inputs.push_back({"sin", c.sin});
    if (op != Op::Rope) inputs.push_back({"b", c.b.data()}), outputs.push_back({"db", c.b.grad()});
    ok =
        sb::check_against_torch(
            fmt::format("{}, (rows, cols) = ({}, {}), float32", op_name(op), rows, cols), inputs, outputs,
            fmt::format("{}/llama_ops_torch.py --check {} {} {}", SACCADE_BENCH_DIR, op_name(op), rows, cols),
            1e-5) &&
        ok;
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--check") == 0) return check_mode();
  int64_t samples = 10, threads = 2, rows = 8192, cols = 1024;
  const std::string which = argc > 2 ? argv[2] : "both";
  if ((argc > 1 && !sb::positive_int(argv[1], samples)) ||
      (argc > 3 && !sb::positive_int(argv[3], threads)) || (argc > 4 && !sb::positive_int(argv[4], rows)) ||
      (argc > 5 && !sb::positive_int(argv[5], cols)) || cols % kHeadDim != 0 ||
      (which != "f32" && which != "bf16" && which != "both"))
    return std::fprintf(
               stderr,
               "usage: llama_ops [samples] [f32|bf16|both] [threads] [rows] [cols]   (cols a multiple "
               "of 64)\n       llama_ops --check\n"),
           2;
  set_num_threads(int(threads));
  std::printf(
      "RMSNorm, RoPE (half) and SwiGLU (issue 40), ours against PyTorch eager and a copy of the same "
      "bytes\n%s\nload average %.2f\n",
      blas_info_line().c_str(), sb::load_average());
  const std::string script = std::string(SACCADE_BENCH_DIR) + "/llama_ops_torch.py";
  sb::TorchPair torch(script);
  std::printf("%s\n", sb::torch_line(torch).c_str());
  if (which != "bf16") table(torch, DType::Float32, int(samples), rows, cols, int(threads));
  if (which != "f32") table(torch, DType::BFloat16, int(samples), rows, cols, int(threads));
  std::printf(
      "(GB/s: the op's least bytes over the median time; torch/ours = torch ms / ours ms, goal >= 1.5; "
      "ours/copy "
      "= ours ms / copy ms, goal <= 1.2; d/p = torch's better thread setting: defaults / "
      "OMP_WAIT_POLICY=PASSIVE)\nload average at end %.2f\n",
      sb::load_average());
  return 0;
}
