#pragma once
// Decoding a trained G2PModel: batched beam search (greedy is beam 1), scoring on a split, the attention
// matrices of chosen words, and how diagonal an attention matrix is.
#include <cstdint>
#include <string>
#include <vector>

#include "examples/common/cmudict.h"
#include "examples/g2p/data.h"
#include "examples/g2p/model.h"

namespace saccade::examples {

/// Batched beam search with length normalisation (as fairseq's: each step expands every live hypothesis
/// by every phone and <eos>, keeps the best 2K candidates, moves those among the best K that end in <eos>
/// to the finished list and continues with the K best others; a word is done once it has K finished
/// hypotheses or after max_len steps). The best finished hypothesis by log-probability / (phones + 1) wins.
/// With K = 1 this is greedy decoding. letters (B, S), lens (B) -> per word, the phone ids without <eos>.
/// Runs under NoGradGuard in eval mode (restoring the mode). Throws saccade::Error for beam < 1.
std::vector<std::vector<int64_t>> beam_search(G2PModel& model, const Tensor& letters, const Tensor& lens,
                                              int64_t beam, int64_t max_len = 32);

/// The pronunciations of `words` (any letters a-z, ' and -), decoded in batches of similar length.
std::vector<Phones> pronounce(G2PModel& model, const G2PVocab& vocab, const std::vector<std::string>& words,
                              int64_t beam, int64_t batch_size = 256);

/// WER and PER (score_g2p) of the model's pronunciations of `words`, and the predictions.
struct G2PEval {
  G2PScore score;
  std::vector<Phones> predictions;
  double seconds = 0;
};
G2PEval evaluate_g2p(G2PModel& model, const G2PVocab& vocab, const std::vector<DictWord>& words, int64_t beam,
                     int64_t batch_size = 256);

/// The attention over the letters of `word` while the model emits `phones` (teacher-forced, eval mode):
/// float32 (heads, n + 1, S) for n phones (+1: the row that emits <eos>); heads = 1 for bahdanau.
Tensor alignment(G2PModel& model, const G2PVocab& vocab, const std::string& word, const Phones& phones);

/// How diagonal an alignment is: the mean, over the n emitted phones (rows 0..n-1 of `weights`, (≥ n, S)),
/// of the attention mass within ±`window` letters of the monotonic path, which puts phone i at letter
/// (i + 0.5) S / n - 0.5. `chance` is the same for uniform attention (the window's share of the letters).
struct Diagonality {
  double mass = 0, chance = 0;
};
Diagonality diagonality(const Tensor& weights, int64_t n, double window = 2);

}  // namespace saccade::examples
