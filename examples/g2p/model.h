#pragma once
// The grapheme-to-phoneme models' common interface and settings. A model reads a word's letters and emits
// its phones: with teacher forcing for training (all steps at once) or one step at a time for decoding,
// keeping an incremental state (the GRU state, or the transformer's key/value caches) whose rows a beam
// search can reorder.
#include <cstdint>
#include <memory>
#include <string>

#include "autograd/variable.h"
#include "nn/serialization.h"
#include "nn/module.h"

namespace saccade::examples {

/// The settings of both models; kept in every checkpoint's metadata so that the CLI and --resume rebuild
/// the model the checkpoint was trained with.
struct G2PConfig {
  std::string model = "bahdanau";  ///< "bahdanau" or "transformer"
  int64_t embed = 64;              ///< letter and phone embedding size (bahdanau)
  int64_t hidden = 256;            ///< GRU state size per direction (bahdanau)
  int64_t d_model = 128;           ///< width (transformer)
  int64_t heads = 4;               ///< attention heads (transformer)
  int64_t layers = 3;              ///< encoder and decoder blocks (transformer)
  int64_t ffn = 512;               ///< position-wise FFN hidden size (transformer)
  double dropout = 0.1;
  double label_smoothing = 0.0;  ///< of the training loss (torch's cross_entropy label_smoothing)
  bool stress = false;           ///< phones carry the lexicon's stress digit on vowels ("ae1"): --stress
  std::string phones;            ///< the phone vocabulary, space separated (G2PVocab::to_string)

  /// The defaults of `model`; throws saccade::Error for another name.
  static G2PConfig defaults(const std::string& model);
  nn::Metadata to_metadata() const;
  /// Throws saccade::Error naming the key when one is missing or not a number.
  static G2PConfig from_metadata(const nn::Metadata& metadata);
  std::string describe() const;
};

/// Rows of a decoding state (model-specific).
struct DecodeState {
  virtual ~DecodeState() = default;
};

class G2PModel : public nn::Module {
 public:
  using nn::Module::Module;
  /// Teacher forcing: letters int64 (B, S), lens int64 (B), phones_in int64 (B, T) starting with <bos> ->
  /// logits (B, T, V), row t predicting phones_out[:, t].
  virtual Variable forward(const Tensor& letters, const Tensor& lens, const Tensor& phones_in) = 0;
  /// The attention of the last forward over the letters: (B, T, S) (bahdanau), or the last decoder block's
  /// cross-attention per head (B, heads, T, S) (transformer).
  virtual Tensor last_alignment() const = 0;
  /// Encodes a batch for decoding; the state has B rows.
  virtual std::unique_ptr<DecodeState> start(const Tensor& letters, const Tensor& lens) = 0;
  /// One decoding step: tokens int64 (N), the previous token of each row -> log-probabilities float32 (N, V)
  /// on the CPU. Run under NoGradGuard, in eval mode.
  virtual Tensor step(DecodeState& state, const Tensor& tokens) = 0;
  /// Keeps rows `rows` (int64 (N'), repeats allowed) of the state, in that order (beam search).
  virtual void reorder(DecodeState& state, const Tensor& rows) = 0;
  const G2PConfig& config() const { return config_; }

 protected:
  G2PConfig config_;
};

/// Builds `config.model` (vocabulary sizes from config.phones), initialised from `seed`. Throws
/// saccade::Error for an unknown model or settings that do not fit.
std::shared_ptr<G2PModel> make_g2p_model(const G2PConfig& config, uint64_t seed);

}  // namespace saccade::examples
