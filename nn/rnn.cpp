#include "nn/rnn.h"

#include <cmath>
#include <string>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "nn/init.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace saccade::nn {

namespace {

// A (rows, cols) parameter drawn from U(-1/√H, 1/√H), as torch's RNNBase.reset_parameters.
Tensor rnn_uniform(const Shape& shape, int64_t hidden_size, Generator* gen) {
  Tensor t = Tensor::empty(shape);
  double k = 1 / std::sqrt(static_cast<double>(hidden_size));
  return init::uniform_(t, -k, k, gen);
}

// Refuses sizes before anything is allocated or initialised: non-positive sizes, products that overflow, and
// parameters that cannot all be held in memory (which would otherwise be allocated and drawn, for seconds,
// layer by layer, until one did not fit). `gates`: 3 (GRU) or 4 (LSTM) stacked gate weights of hidden_size
// rows each; layer l > 0 of `num_directions` takes the previous layer's num_directions * hidden_size
// features.
void check_sizes(const char* module, int64_t input_size, int64_t hidden_size, int64_t gates,
                 int64_t num_layers = 1, int64_t num_directions = 1, bool bias = true) {
  SACCADE_CHECK(input_size > 0 && hidden_size > 0,
                "{}: expected positive sizes, got input_size = {}, hidden_size = {}", module, input_size,
                hidden_size);
  const int64_t rows = checked_mul(gates, hidden_size, module), D = num_directions;
  const int64_t upper = checked_mul(num_layers - 1, D, module);  // weight_ih of layers 1.. (per direction)
  check_allocation({{D, {rows, input_size}},
                    {upper, {rows, checked_mul(D, hidden_size, module)}},
                    {checked_mul(num_layers, D, module), {rows, hidden_size}},
                    {bias ? checked_mul(checked_mul(2, num_layers, module), D, module) : 0, {rows}}},
                   DType::Float32, Device::cpu(), module);
}

// Checks x (B, in) or (in) and a state (B, H) or (H) (undefined: zeros of that shape); returns the state.
Variable check_step(const char* module, const Variable& x, const Variable& h, int64_t input_size,
                    int64_t hidden_size, const char* state_name) {
  SACCADE_CHECK(x.defined(), "{}: got an undefined input", module);
  SACCADE_CHECK((x.dim() == 1 || x.dim() == 2) && x.size(-1) == input_size,
                "{}: expected input of shape (B, {}) or ({}) (input_size = {}), got {}", module, input_size,
                input_size, input_size, x.shape());
  Shape want = x.dim() == 2 ? Shape{x.size(0), hidden_size} : Shape{hidden_size};
  if (!h.defined()) return Variable(ops::zeros(want, x.dtype(), x.device()));
  SACCADE_CHECK(h.shape() == want,
                "{}: expected {} of shape {} (batch, hidden_size = {}) for input {}, got {}", module,
                state_name, want, hidden_size, x.shape(), h.shape());
  return h;
}

// One GRU step from the input projection gi = x W_ih^T + b_ih (B, 3H) or (3H) and the state h (B, H) or (H),
// its gate math fused (gru_gates; the reference is gru_gates_composed).
Variable gru_step(const Variable& gi, const Variable& h, const Variable& w_hh, const Variable& b_hh) {
  Variable gh = linear(h, w_hh, b_hh);
  if (gi.dim() == 1) return squeeze(gru_gates(unsqueeze(gi, 0), unsqueeze(gh, 0), unsqueeze(h, 0)), 0);
  return gru_gates(gi, gh, h);
}

}  // namespace

// ---- GRUCell ----

GRUCell::GRUCell(int64_t input_size, int64_t hidden_size, bool bias, Generator* gen)
    : Module("GRUCell"), input_size_(input_size), hidden_size_(hidden_size) {
  ErrorScope scope(name());
  check_sizes("GRUCell", input_size, hidden_size, 3, 1, 1, bias);
  weight_ih = register_parameter("weight_ih", rnn_uniform({3 * hidden_size, input_size}, hidden_size, gen));
  weight_hh = register_parameter("weight_hh", rnn_uniform({3 * hidden_size, hidden_size}, hidden_size, gen));
  if (bias) {
    bias_ih = register_parameter("bias_ih", rnn_uniform({3 * hidden_size}, hidden_size, gen));
    bias_hh = register_parameter("bias_hh", rnn_uniform({3 * hidden_size}, hidden_size, gen));
  }
}

// x: (B, in), h: (B, H) -> (B, H); or unbatched (in), (H) -> (H)
Variable GRUCell::forward(const Variable& x, const Variable& h) {
  ErrorScope scope(name(), {shape_of(x), shape_of(h)});
  Variable h0 = check_step("GRUCell", x, h, input_size_, hidden_size_, "hidden state");
  return gru_step(linear(x, weight_ih, bias_ih), h0, weight_hh, bias_hh);
}

// ---- GRU ----

GRU::GRU(int64_t input_size, int64_t hidden_size, GRUOptions options, Generator* gen)
    : Module("GRU"), input_size_(input_size), hidden_size_(hidden_size), options_(options) {
  ErrorScope scope(name());
  SACCADE_CHECK(options.num_layers > 0, "GRU: expected num_layers > 0, got {}", options.num_layers);
  SACCADE_CHECK(options.dropout >= 0 && options.dropout < 1, "GRU: expected dropout in [0, 1), got {}",
                options.dropout);
  const int64_t H = hidden_size, D = num_directions();
  check_sizes("GRU", input_size, hidden_size, 3, options.num_layers, D, options.bias);
  for (int64_t l = 0; l < options.num_layers; ++l) {
    for (int64_t d = 0; d < D; ++d) {
      std::string s = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      int64_t in = l == 0 ? input_size : D * H;
      weight_ih.push_back(register_parameter("weight_ih" + s, rnn_uniform({3 * H, in}, H, gen)));
      weight_hh.push_back(register_parameter("weight_hh" + s, rnn_uniform({3 * H, H}, H, gen)));
      if (options.bias) {
        bias_ih.push_back(register_parameter("bias_ih" + s, rnn_uniform({3 * H}, H, gen)));
        bias_hh.push_back(register_parameter("bias_hh" + s, rnn_uniform({3 * H}, H, gen)));
      }
    }
  }
}

// x: (B, T, in) (batch_first) or (T, B, in) or (T, in); h0: (D L, B, H) or (D L, H); valid_lens: (B)
//   -> output: x's layout with D H features, h_n: (D L, B, H) or (D L, H)
GRUOutput GRU::forward(const Variable& x, const Variable& h0, const Tensor& valid_lens) {
  ErrorScope scope(name(), {shape_of(x), shape_of(h0), shape_of(valid_lens)});
  const int64_t L = options_.num_layers, H = hidden_size_, D = num_directions();
  SACCADE_CHECK(x.defined(), "GRU: got an undefined input");
  SACCADE_CHECK((x.dim() == 2 || x.dim() == 3) && x.size(-1) == input_size_,
                "GRU: expected input of shape {} or (T, {}) (input_size = {}), got {}",
                options_.batch_first ? "(B, T, in)" : "(T, B, in)", input_size_, input_size_, x.shape());
  const bool unbatched = x.dim() == 2;
  // Work on (B, T, in) or (T, B, in) with time at dim `td`.
  Variable seq = unbatched ? unsqueeze(x, options_.batch_first ? 0 : 1) : x;
  const int td = options_.batch_first ? 1 : 0;
  const int64_t T = seq.size(td), B = seq.size(1 - td);
  SACCADE_CHECK(T > 0, "GRU: expected a sequence of at least one step, got input {}", x.shape());
  Variable h;
  if (h0.defined()) {
    Shape want = unbatched ? Shape{D * L, H} : Shape{D * L, B, H};
    SACCADE_CHECK(
        h0.shape() == want,
        "GRU: expected h0 of shape {} (num_directions * num_layers, batch, hidden_size) for input {}, "
        "got {}",
        want, x.shape(), h0.shape());
    h = unbatched ? unsqueeze(h0, 1) : h0;
  }
  // keep: Bool (B, T), true at the valid steps; undefined when every step is valid.
  Tensor keep;
  if (valid_lens.defined()) {
    SACCADE_CHECK(!unbatched && valid_lens.dtype() == DType::Int64 && valid_lens.shape() == Shape{B},
                  "GRU: expected valid_lens int64 of shape ({}) for input {}, got {} {}", B, x.shape(),
                  dtype_name(valid_lens.dtype()), valid_lens.shape());
    Tensor lens = valid_lens.to(x.device());
    const int64_t lo = ops::min(lens).item<int64_t>(), hi = ops::max(lens).item<int64_t>();
    SACCADE_CHECK(lo >= 0 && hi <= T,
                  "GRU: expected valid_lens within [0, {}] for input {}, got values in [{}, {}]", T,
                  x.shape(), lo, hi);
    keep = ops::lt(ops::arange(T, DType::Int64, x.device()).unsqueeze(0), lens.unsqueeze(1));
  }

  std::vector<Variable> finals;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<Variable> directions;
    for (int64_t d = 0; d < D; ++d) {
      const size_t k = static_cast<size_t>(D * l + d);
      Variable b_ih = options_.bias ? bias_ih[k] : Variable(), b_hh = options_.bias ? bias_hh[k] : Variable();
      // The input projections of all steps in one product: (B, T, 3H) or (T, B, 3H).
      Variable gi = linear(seq, weight_ih[k], b_ih);
      Variable state = h.defined() ? select(h, 0, static_cast<int64_t>(k))
                                   : Variable(ops::zeros({B, H}, x.dtype(), x.device()));
      std::vector<Variable> outs(static_cast<size_t>(T));
      for (int64_t i = 0; i < T; ++i) {
        const int64_t t = d == 0 ? i : T - 1 - i;
        Variable next = gru_step(select(gi, td, t), state, weight_hh[k], b_hh);
        if (keep.defined()) {
          // Padded steps leave the state as it is and output zeros.
          Tensor m = keep.select(1, t).unsqueeze(1);  // (B, 1)
          state = where(m, next, state);
          outs[static_cast<size_t>(t)] = where(m, next, Variable(ops::zeros({1, 1}, x.dtype(), x.device())));
        } else {
          state = next;
          outs[static_cast<size_t>(t)] = state;
        }
      }
      finals.push_back(state);
      directions.push_back(stack(outs, td));
    }
    seq = D == 1 ? directions[0] : cat(directions, -1);
    if (l + 1 < L) seq = dropout(seq, options_.dropout, is_training(), options_.dropout_generator);
  }
  Variable h_n = stack(finals, 0);
  if (unbatched) return {squeeze(seq, options_.batch_first ? 0 : 1), squeeze(h_n, 1)};
  return {seq, h_n};
}

// ---- LSTMCell ----

LSTMCell::LSTMCell(int64_t input_size, int64_t hidden_size, bool bias, Generator* gen)
    : Module("LSTMCell"), input_size_(input_size), hidden_size_(hidden_size) {
  ErrorScope scope(name());
  check_sizes("LSTMCell", input_size, hidden_size, 4, 1, 1, bias);
  weight_ih = register_parameter("weight_ih", rnn_uniform({4 * hidden_size, input_size}, hidden_size, gen));
  weight_hh = register_parameter("weight_hh", rnn_uniform({4 * hidden_size, hidden_size}, hidden_size, gen));
  if (bias) {
    bias_ih = register_parameter("bias_ih", rnn_uniform({4 * hidden_size}, hidden_size, gen));
    bias_hh = register_parameter("bias_hh", rnn_uniform({4 * hidden_size}, hidden_size, gen));
  }
}

// x: (B, in), h, c: (B, H) -> h', c': (B, H); or unbatched
LSTMState LSTMCell::forward(const Variable& x, const LSTMState& state) {
  ErrorScope scope(name(), {shape_of(x)});
  Variable h = check_step("LSTMCell", x, state.h, input_size_, hidden_size_, "hidden state h");
  Variable c = check_step("LSTMCell", x, state.c, input_size_, hidden_size_, "cell state c");
  Variable gates = linear(x, weight_ih, bias_ih) + linear(h, weight_hh, bias_hh);
  std::vector<Variable> g = chunk(gates, 4, -1);
  Variable c1 = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
  Variable h1 = sigmoid(g[3]) * tanh(c1);
  return {h1, c1};
}

}  // namespace saccade::nn
