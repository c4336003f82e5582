#pragma once
// Parameter initialisers, as torch.nn.init. Each fills a float Tensor in place (through a copy of its handle,
// so `init::zeros_(param.data())` works) and returns it. Random ones draw from `gen` (the default generator
// when null), so the same seed gives the same parameters. Our Philox stream differs from torch's, so values
// match torch in distribution, not element for element.
#include <string_view>
#include <utility>

#include "ops/random.h"
#include "ops/tensor.h"

namespace saccade::nn::init {

/// Which fan kaiming_* keeps the variance of: fan_in (forward pass) or fan_out (backward pass).
enum class FanMode { FanIn, FanOut };
/// The nonlinearities calculate_gain knows (Conv layers count as Linear).
enum class Nonlinearity { Linear, Sigmoid, Tanh, Relu, LeakyRelu, Selu };

/// The recommended gain for `nonlinearity` (as torch.nn.init.calculate_gain): Linear and Sigmoid 1, Tanh 5/3,
/// Relu √2, LeakyRelu √(2 / (1 + slope²)) with slope `param` (0.01 when param < 0), Selu 3/4.
double calculate_gain(Nonlinearity nonlinearity, double param = -1);

/// (fan_in, fan_out) of a weight of `shape` (as torch.nn.init._calculate_fan_in_and_fan_out): for shape
/// (out, in, k...) fan_in = in · Πk and fan_out = out · Πk. Throws saccade::Error for fewer than 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Shape& shape);

/// t ~ U[a, b) / N(mean, std²). Throws saccade::Error for an undefined or non-float tensor.
Tensor uniform_(const Tensor& t, double a = 0, double b = 1, Generator* gen = nullptr);
Tensor normal_(const Tensor& t, double mean = 0, double std = 1, Generator* gen = nullptr);
/// t = 0 / 1 / value (any dtype).
Tensor zeros_(const Tensor& t);
Tensor ones_(const Tensor& t);
Tensor constant_(const Tensor& t, double value);

/// Glorot & Bengio 2010, "Understanding the difficulty of training deep feedforward neural networks", eq. 16:
/// std = gain · √(2 / (fan_in + fan_out)); uniform on [-√3 std, √3 std), or normal with that std.
Tensor xavier_uniform_(const Tensor& t, double gain = 1, Generator* gen = nullptr);
Tensor xavier_normal_(const Tensor& t, double gain = 1, Generator* gen = nullptr);

/// He et al. 2015, "Delving deep into rectifiers", eq. 10 / 14: std = gain / √fan with gain =
/// calculate_gain(nonlinearity, a) and fan chosen by `mode`; uniform on [-√3 std, √3 std), or normal.
/// A tensor with no elements is left as is (torch warns and returns).
Tensor kaiming_uniform_(const Tensor& t, double a = 0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyRelu, Generator* gen = nullptr);
Tensor kaiming_normal_(const Tensor& t, double a = 0, FanMode mode = FanMode::FanIn,
                       Nonlinearity nonlinearity = Nonlinearity::LeakyRelu, Generator* gen = nullptr);

/// While alive, the random initialisers on this thread (uniform_, normal_ and everything built on them:
/// xavier_*, kaiming_*, linear_default_init_, the modules' own init) leave their tensors as they are, which
/// is uninitialised memory from ops::empty for a new parameter; zeros_, ones_ and constant_ still write. For
/// a model whose every parameter is about to be loaded (hf::load_llama, the GPT example's Hugging Face
/// loaders), as transformers skips the init of the weights it loads: the load then neither draws 124M random
/// numbers (seconds) nor touches the pages twice. Nests; restores the previous state on destruction.
class SkipInitGuard {
 public:
  SkipInitGuard();
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;

 private:
  bool previous_;
};

/// Whether a SkipInitGuard is alive on this thread.
bool init_skipped();

/// torch.nn.Linear's reset_parameters (also Conv's): weight (out, in, k...) by kaiming_uniform_(a = √5), i.e.
/// U(-1/√fan_in, 1/√fan_in), and bias (out), when defined, by U(-1/√fan_in, 1/√fan_in) (0 when fan_in is 0).
void linear_default_init_(const Tensor& weight, const Tensor& bias, Generator* gen = nullptr);

}  // namespace saccade::nn::init
