#pragma once
// The captioning models' common interface and their settings. A captioner encodes a batch of 56x56 scenes
// into a grid of feature vectors (the "memory" the decoder attends over), then decodes a caption from it:
// with teacher forcing for training (all steps at once, given the reference tokens) or greedily for
// evaluation (one step at a time, each fed the previous step's argmax), reporting the attention weights over
// the grid for every emitted token.
#include <cstdint>
#include <memory>
#include <string>

#include "autograd/variable.h"
#include "nn/serialization.h"
#include "nn/module.h"

namespace saccade::examples {

/// The settings of both models; saved in every checkpoint's metadata (to_metadata) so that --eval-only and
/// --resume rebuild the model the checkpoint was trained with.
struct CaptionConfig {
  std::string model = "sat";  ///< "sat" (show, attend and tell) or "transformer"
  int64_t conv1 = 16;         ///< channels of the first conv layer
  int64_t conv2 = 32;         ///< channels of the second conv layer
  int64_t grid = 7;           ///< the grid is grid x grid positions (7: pools of 2 then 4; 14: 2 and 2)
  int64_t d_model = 128;      ///< feature size of the grid vectors (and the transformer's width)
  int64_t embed = 64;         ///< token embedding size (sat)
  int64_t hidden = 128;       ///< GRU state size (sat)
  int64_t attn_hidden = 128;  ///< additive attention's hidden size (sat)
  int64_t heads = 4;          ///< attention heads (transformer)
  int64_t layers = 2;         ///< decoder blocks (transformer)
  int64_t ffn = 256;          ///< position-wise FFN hidden size (transformer)
  double dropout = 0.0;       ///< dropout in the decoder (transformer)

  /// The defaults of `model` ("sat" or "transformer"); throws saccade::Error for another name.
  static CaptionConfig defaults(const std::string& model);
  /// The settings as checkpoint metadata ("model", "conv1", ...), and back. from_metadata throws
  /// saccade::Error naming the key when one is missing or not a number.
  nn::Metadata to_metadata() const;
  static CaptionConfig from_metadata(const nn::Metadata& metadata);
  /// One line: "model sat, conv 16/32, grid 7x7, d_model 128, ...".
  std::string describe() const;
};

/// What greedy decoding produced for a batch of B scenes.
struct GreedyOutput {
  Tensor tokens;     ///< int64 (B, T): the emitted tokens (no <bos> prompt); rows run on (<pad>) after <eos>
  Tensor attention;  ///< float32 (B, T, G * G): row t is the attention over the grid when token t was emitted
};

/// A captioning model (sat or transformer).
class Captioner : public nn::Module {
 public:
  using nn::Module::Module;
  /// images float32 (B, 1, 56, 56) -> memory (B, G * G, d_model): the grid's feature vectors, row-major
  /// over the grid, with their positional encoding added.
  virtual Variable encode(const Tensor& images) = 0;
  /// Teacher forcing: memory (B, G * G, d_model), tokens int64 (B, T) starting with <bos> -> logits (B, T,
  /// V), row t predicting token t + 1.
  virtual Variable decode(const Variable& memory, const Tensor& tokens) = 0;
  /// Greedy decoding of at most `max_len` tokens from <bos>; stops early once every row has emitted <eos>.
  /// Run it under NoGradGuard.
  virtual GreedyOutput greedy(const Variable& memory, int64_t max_len) = 0;
  /// G: the memory is a G x G grid.
  virtual int64_t grid_size() const = 0;
  const CaptionConfig& config() const { return config_; }

 protected:
  CaptionConfig config_;
};

/// Builds the model `config.model` names, initialised from `seed`. Throws saccade::Error for an unknown
/// model or settings that do not fit (e.g. d_model not divisible by heads).
std::shared_ptr<Captioner> make_captioner(const CaptionConfig& config, uint64_t seed);

}  // namespace saccade::examples
