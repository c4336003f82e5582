#pragma once
// Recurrent layers with torch's parameter names and layouts: GRUCell, GRU (stacked, over a sequence) and
// LSTMCell (torch.nn.GRUCell / GRU / LSTMCell). Gates are packed along dim 0 of the weights in torch's order
// (r, z, n for the GRU; i, f, g, o for the LSTM), so torch's state_dicts load as they are.
#include <cstdint>
#include <vector>

#include "nn/module.h"
#include "ops/random.h"

namespace saccade::nn {

/// One step of a gated recurrent unit (Cho et al. 2014; torch.nn.GRUCell, d2l section 10.2):
///   r = σ(W_ir x + b_ir + W_hr h + b_hr)
///   z = σ(W_iz x + b_iz + W_hz h + b_hz)
///   n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))
///   h' = (1 - z) ⊙ n + z ⊙ h
///
/// Parameters (torch's names): `weight_ih` (3H, input_size) = [W_ir; W_iz; W_in], `weight_hh` (3H, H),
/// `bias_ih` (3H), `bias_hh` (3H) (no biases when `bias` is false); all initialised U(-1/√H, 1/√H) from `gen`
/// in that order, as torch.
/// forward: x (B, input_size) and h (B, H) -> h' (B, H); or unbatched x (input_size), h (H) -> (H). An
/// undefined h means zeros.
/// Throws saccade::Error naming "GRUCell" for non-positive sizes, an input that is not 1-d or 2-d or whose
/// last dim is not input_size, or a hidden state that is not (B, H).
class GRUCell : public Module {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true, Generator* gen = nullptr);
  Variable forward(const Variable& x, const Variable& h = Variable());

  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  Variable weight_ih, weight_hh, bias_ih, bias_hh;

 private:
  int64_t input_size_, hidden_size_;
};

/// GRU's settings. Unlike torch, batch_first defaults to true (saccade is batch first throughout).
struct GRUOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = true;
  /// Dropout on the outputs of every layer but the last, in training mode (as torch.nn.GRU's dropout).
  double dropout = 0.0;
  /// Draws the dropout masks (the default generator when null); must outlive the module.
  Generator* dropout_generator = nullptr;
};

/// GRU's results: the last layer's hidden state at every step, and every layer's final hidden state.
struct GRUOutput {
  Variable output;  // (B, T, H) when batch_first, else (T, B, H); (T, H) for an unbatched input
  Variable h_n;     // (num_layers, B, H); (num_layers, H) for an unbatched input
};

/// A stack of GRU layers run over a sequence (torch.nn.GRU; d2l section 10.3): layer l's input at step t is
/// layer l-1's hidden state at t (after dropout, in training), and each step follows GRUCell's equations.
///
/// Parameters, per layer l (torch's names): `weight_ih_l{l}` (3H, input_size for l = 0, else H),
/// `weight_hh_l{l}` (3H, H), `bias_ih_l{l}` (3H), `bias_hh_l{l}` (3H), all U(-1/√H, 1/√H) from `gen` in
/// torch's order (layer by layer).
/// forward: x (B, T, input_size) when batch_first, (T, B, input_size) otherwise, or unbatched (T,
/// input_size); h0 (num_layers, B, H) (or (num_layers, H) unbatched), undefined for zeros.
/// Throws saccade::Error naming "GRU" for bad sizes or dropout, an input of the wrong rank, last dim or no
/// steps, or an h0 of the wrong shape.
class GRU : public Module {
 public:
  GRU(int64_t input_size, int64_t hidden_size, GRUOptions options = {}, Generator* gen = nullptr);
  GRUOutput forward(const Variable& x, const Variable& h0 = Variable());

  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  const GRUOptions& options() const { return options_; }
  /// Per layer; the biases are empty when options.bias is false.
  std::vector<Variable> weight_ih, weight_hh, bias_ih, bias_hh;

 private:
  int64_t input_size_, hidden_size_;
  GRUOptions options_;
};

/// The LSTM's state: hidden state h and cell state c, each (B, H) (or (H) unbatched).
struct LSTMState {
  Variable h, c;
};

/// One step of a long short-term memory cell (Hochreiter & Schmidhuber 1997; torch.nn.LSTMCell; d2l section
/// 10.1):
///   [i, f, g, o] = W_ih x + b_ih + W_hh h + b_hh, split in four along the features
///   c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g),   h' = σ(o) ⊙ tanh(c')
///
/// Parameters (torch's names): `weight_ih` (4H, input_size) = [W_ii; W_if; W_ig; W_io], `weight_hh` (4H, H),
/// `bias_ih` (4H), `bias_hh` (4H) (none when `bias` is false), all U(-1/√H, 1/√H) from `gen`.
/// forward: x (B, input_size) and state {h (B, H), c (B, H)} -> {h', c'}; or unbatched. Undefined h or c
/// mean zeros.
/// Throws saccade::Error naming "LSTMCell" for non-positive sizes, an input of the wrong rank or last dim, or
/// a state that is not (B, H).
class LSTMCell : public Module {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true, Generator* gen = nullptr);
  LSTMState forward(const Variable& x, const LSTMState& state = {});

  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  Variable weight_ih, weight_hh, bias_ih, bias_hh;

 private:
  int64_t input_size_, hidden_size_;
};

}  // namespace saccade::nn
