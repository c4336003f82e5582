#pragma once
// Caption metrics: exact match, corpus BLEU-4, item accuracy, and attention localization.
// Token sequences here are content tokens: no <bos>, <eos> or <pad> (Vocab::strip removes them).
#include <cstdint>
#include <vector>

#include "examples/common/scenes.h"
#include "ops/tensor.h"

namespace saccade::examples {

using TokenSeq = std::vector<int64_t>;

/// The share of candidates equal to their reference, token for token. Throws saccade::Error when the lists
/// differ in length or are empty.
double exact_match_rate(const std::vector<TokenSeq>& candidates, const std::vector<TokenSeq>& references);

/// Corpus BLEU (Papineni et al. 2002, "BLEU: a method for automatic evaluation of machine translation", eq.
/// 1-2) with one reference per candidate: BLEU = BP * exp(sum_{n=1..max_n} log(p_n) / max_n), where p_n =
/// (sum over candidates of the clipped n-gram matches: each candidate n-gram counts at most as often as it
/// occurs in the reference) / (sum over candidates of their n-gram counts), and BP = 1 if c > r else exp(1 -
/// r / c) with c and r the total candidate and reference lengths. No smoothing, as the standard corpus BLEU
/// (as nltk.translate.bleu_score.corpus_bleu and sacrebleu with smooth="none"): any p_n = 0 gives BLEU 0, as
/// does c = 0. Throws saccade::Error when the lists differ in length or are empty, or max_n < 1.
double corpus_bleu(const std::vector<TokenSeq>& candidates, const std::vector<TokenSeq>& references,
                   int max_n = 4);

/// The share of ground-truth (cell, class) items, over all scenes, that the generated caption of their scene
/// contains (parse_caption's items; malformed chunks contribute nothing, extra items cost nothing).
/// `generated[b]`: the model's tokens for scene b (any <bos>/<eos>/<pad> handled as parse_caption does).
/// Throws saccade::Error when the lists differ in length or there are no ground-truth items.
double item_accuracy(const std::vector<std::vector<SceneItem>>& truth, const std::vector<TokenSeq>& generated,
                     const Vocab& vocab);

/// The share of attention weight on `cell` (0..3) of a 56x56 scene for one attention map over a G x G grid of
/// positions covering the image: weights (G, G) or (G * G), row-major, any float dtype. Grid position (i, j)
/// covers rows [56 i / G, 56 (i + 1) / G) and columns likewise; a position straddling a cell border (odd G)
/// counts with the fraction of its area inside the cell. Divided by the total weight (1 for a softmax).
/// Throws saccade::Error for a non-square grid, a cell out of range or a total weight <= 0.
double cell_attention_share(const Tensor& weights, int cell);

/// Attention localization: the mean, over every class-name token of every generated caption (both tokens of
/// "ankle boot" count), of cell_attention_share(attention row of that token, cell its item names).
struct Localization {
  double mean = 0;    ///< 0 when count is 0
  int64_t count = 0;  ///< class-name tokens averaged over
};

/// `generated[b]`: the tokens the model emitted for scene b (no <bos> prompt in front), as given to
/// parse_caption; `attention[b]`: (T, G, G) or (T, G * G), row t the attention weights the decoder used when
/// it emitted token t. Throws saccade::Error when the lists differ in length, a tensor is not 2-d or 3-d, or
/// it has no row for a class-name token's position.
Localization attention_localization(const std::vector<TokenSeq>& generated,
                                    const std::vector<Tensor>& attention, const Vocab& vocab);

}  // namespace saccade::examples
