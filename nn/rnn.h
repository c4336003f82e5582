#pragma once
// Recurrent layers with torch's parameter names and layouts: GRUCell, GRU (stacked, over a sequence) and
// LSTMCell (torch.nn.GRUCell / GRU / LSTMCell). Gates are packed along dim 0 of the weights in torch's order
// (r, z, n for the GRU; i, f, g, o for the LSTM), so torch's state_dicts load as they are.
#include <cstdint>
#include <vector>

#include "autograd/functions/nn.h"
#include "nn/module.h"
#include "ops/random.h"

namespace saccade::nn {

/// The gate math of one GRU step composed of autograd ops (saccade::gru_gates_composed,
/// autograd/functions/nn.h, where it also gives the fused gru_gates its second derivative).
using saccade::gru_gates_composed;

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
/// Throws saccade::Error naming "GRUCell" for non-positive sizes or sizes whose parameters cannot be held in
/// memory (refused before anything is allocated), an input that is not 1-d or 2-d or whose last dim is not
/// input_size, or a hidden state that is not (B, H).
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
  /// A second GRU per layer reads the sequence backwards; the layer's output concatenates both directions'
  /// states, [forward; reverse], so layers above the first take 2H inputs (as torch).
  bool bidirectional = false;
};

/// GRU's results: the last layer's hidden state at every step, and every layer's final hidden state.
/// With D = 2 directions (bidirectional) else 1:
struct GRUOutput {
  Variable output;  // (B, T, D H) when batch_first, else (T, B, D H); (T, D H) for an unbatched input
  Variable h_n;     // (D num_layers, B, H), row D l + d for layer l, direction d; (D num_layers, H) unbatched
};

/// A stack of GRU layers run over a sequence (torch.nn.GRU; d2l section 10.3): layer l's input at step t is
/// layer l-1's hidden state at t (after dropout, in training), and each step follows GRUCell's equations.
///
/// Bidirectional (Schuster & Paliwal 1997; as the encoder of Bahdanau et al. 2015, section 3.2): each layer
/// also runs a second GRU from the last step to the first, and the layer's output at t is [h→_t; h←_t].
///
/// Parameters, per layer l (torch's names): `weight_ih_l{l}` (3H, input_size for l = 0, else D H),
/// `weight_hh_l{l}` (3H, H), `bias_ih_l{l}` (3H), `bias_hh_l{l}` (3H), and for the reverse direction the same
/// with the suffix `_reverse` (`weight_ih_l0_reverse`, ...); all U(-1/√H, 1/√H) from `gen` in torch's order
/// (layer by layer, forward direction first).
/// forward: x (B, T, input_size) when batch_first, (T, B, input_size) otherwise, or unbatched (T,
/// input_size); h0 (D num_layers, B, H) (or (D num_layers, H) unbatched), undefined for zeros.
/// valid_lens: int64 (B), each in [0, T], or undefined (every sequence has T steps). Padded sequences run as
/// torch's pack_padded_sequence / pad_packed_sequence would: the forward direction's state stops changing
/// after step valid_len - 1 (so h_n holds the state at each sequence's last valid step), the reverse
/// direction starts from h0 at each sequence's last valid step (steps past it leave its state at h0), and
/// the outputs at padded steps are zeros.
/// Throws saccade::Error naming "GRU" for bad sizes (non-positive, or parameters of all layers that cannot be
/// held in memory: refused before anything is allocated) or dropout, an input of the wrong rank, last dim or
/// no steps, an h0 of the wrong shape, or valid_lens that are not int64 (B) within [0, T] (or given for an
/// unbatched input).
class GRU : public Module {
 public:
  GRU(int64_t input_size, int64_t hidden_size, GRUOptions options = {}, Generator* gen = nullptr);
  GRUOutput forward(const Variable& x, const Variable& h0 = Variable(), const Tensor& valid_lens = Tensor());

  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  /// D: 2 when bidirectional, else 1.
  int64_t num_directions() const { return options_.bidirectional ? 2 : 1; }
  const GRUOptions& options() const { return options_; }
  /// Per layer and direction, index D l + d; the biases are empty when options.bias is false.
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
/// Throws saccade::Error naming "LSTMCell" for non-positive sizes or sizes whose parameters cannot be held in
/// memory (refused before anything is allocated), an input of the wrong rank or last dim, or a state that is
/// not (B, H).
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
