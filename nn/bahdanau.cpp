#include "nn/bahdanau.h"

#include "autograd/functions/shape.h"

namespace saccade::nn {

BahdanauDecoderCell::BahdanauDecoderCell(int64_t embed_size, int64_t num_hiddens, int64_t enc_hiddens,
                                         double dropout, Generator* gen)
    : Module("BahdanauDecoderCell"),
      embed_size_(embed_size),
      num_hiddens_(num_hiddens),
      enc_hiddens_(enc_hiddens < 0 ? num_hiddens : enc_hiddens) {
  ErrorScope scope(name());
  SACCADE_CHECK(
      embed_size > 0 && num_hiddens > 0 && enc_hiddens_ > 0,
      "BahdanauDecoderCell: sizes must be positive, got embed_size {}, num_hiddens {}, enc_hiddens {}",
      embed_size, num_hiddens, enc_hiddens_);
  SACCADE_CHECK(embed_size <= INT64_MAX - enc_hiddens_,
                "BahdanauDecoderCell: size too large: embed_size {} + enc_hiddens {} overflows int64",
                embed_size, enc_hiddens_);
  attention = register_module(
      "attention", std::make_shared<AdditiveAttention>(enc_hiddens_, num_hiddens, num_hiddens, dropout, gen));
  rnn = register_module("rnn", std::make_shared<GRUCell>(enc_hiddens_ + embed_size, num_hiddens, true, gen));
}

BahdanauStep BahdanauDecoderCell::step(const Variable& x, const Variable& hidden, const Variable& enc_outputs,
                                       const Tensor& enc_valid_lens) {
  ErrorScope scope(name(), {shape_of(x), shape_of(hidden), shape_of(enc_outputs), shape_of(enc_valid_lens)});
  SACCADE_CHECK(enc_outputs.defined(), "BahdanauDecoderCell: got an undefined enc_outputs");
  SACCADE_CHECK(enc_outputs.dim() == 3 && enc_outputs.size(2) == enc_hiddens_,
                "BahdanauDecoderCell: expected enc_outputs (B, Tk, {}), got {}", enc_hiddens_,
                enc_outputs.shape());
  return step(x, hidden, enc_outputs, project_keys(enc_outputs), enc_valid_lens);
}

// x: (B, E), hidden: (B, H), enc_outputs: (B, Tk, H'), enc_keys: (B, Tk, H)
//   -> hidden (B, H), context (B, H'), weights (B, Tk)
BahdanauStep BahdanauDecoderCell::step(const Variable& x, const Variable& hidden, const Variable& enc_outputs,
                                       const Variable& enc_keys, const Tensor& enc_valid_lens) {
  ErrorScope scope(name(), {shape_of(x), shape_of(hidden), shape_of(enc_outputs), shape_of(enc_keys)});
  const char* op = "BahdanauDecoderCell";
  SACCADE_CHECK(x.defined() && hidden.defined() && enc_outputs.defined() && enc_keys.defined(),
                "{}: got an undefined input, hidden state, enc_outputs or enc_keys", op);
  SACCADE_CHECK(x.dim() == 2 && hidden.dim() == 2 && enc_outputs.dim() == 3 && x.size(0) == hidden.size(0) &&
                    enc_outputs.size(0) == x.size(0) && x.size(1) == embed_size_ &&
                    hidden.size(1) == num_hiddens_ && enc_outputs.size(2) == enc_hiddens_,
                "{}: expected x (B, {}), hidden (B, {}), enc_outputs (B, Tk, {}), got {}, {}, {}", op,
                embed_size_, num_hiddens_, enc_hiddens_, x.shape(), hidden.shape(), enc_outputs.shape());
  SACCADE_CHECK(enc_keys.dim() == 3 && enc_keys.size(0) == x.size(0) &&
                    enc_keys.size(1) == enc_outputs.size(1) && enc_keys.size(2) == num_hiddens_,
                "{}: expected enc_keys (B, Tk, {}) = project_keys(enc_outputs of shape {}), got {}", op,
                num_hiddens_, enc_outputs.shape(), enc_keys.shape());
  // query: (B, 1, H) -> context: (B, 1, H')
  AttentionOutput r =
      attention->forward_projected(unsqueeze(hidden, 1), enc_keys, enc_outputs, enc_valid_lens);
  Variable c = squeeze(r.output, 1);
  Variable h = rnn->forward(cat({c, x}, -1), hidden);
  Variable w = squeeze(r.weights, 1);
  weights_ = w.data();
  return {h, c, w};
}

}  // namespace saccade::nn
