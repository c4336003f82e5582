#include "examples/common/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace saccade::examples {

namespace {
void check_pairs(const char* op, size_t a, size_t b) {
  SACCADE_CHECK(a == b, "{}: {} candidates but {} references", op, a, b);
  SACCADE_CHECK(a > 0, "{}: no sentences given", op);
}

std::map<TokenSeq, int64_t> ngram_counts(const TokenSeq& s, int n) {
  std::map<TokenSeq, int64_t> counts;
  for (size_t i = 0; i + n <= s.size(); ++i) ++counts[TokenSeq(s.begin() + i, s.begin() + i + n)];
  return counts;
}
}  // namespace

double exact_match_rate(const std::vector<TokenSeq>& candidates, const std::vector<TokenSeq>& references) {
  check_pairs("exact_match_rate", candidates.size(), references.size());
  int64_t same = 0;
  for (size_t i = 0; i < candidates.size(); ++i) same += candidates[i] == references[i];
  return static_cast<double>(same) / static_cast<double>(candidates.size());
}

double corpus_bleu(const std::vector<TokenSeq>& candidates, const std::vector<TokenSeq>& references,
                   int max_n) {
  check_pairs("corpus_bleu", candidates.size(), references.size());
  SACCADE_CHECK(max_n >= 1, "corpus_bleu: max_n must be at least 1, got {}", max_n);
  std::vector<int64_t> matches(max_n, 0), totals(max_n, 0);
  int64_t c = 0, r = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    c += static_cast<int64_t>(candidates[i].size());
    r += static_cast<int64_t>(references[i].size());
    for (int n = 1; n <= max_n; ++n) {
      auto ref = ngram_counts(references[i], n);
      for (auto& [gram, count] : ngram_counts(candidates[i], n)) {
        auto it = ref.find(gram);
        matches[n - 1] += std::min(count, it == ref.end() ? int64_t{0} : it->second);
        totals[n - 1] += count;
      }
    }
  }
  if (c == 0) return 0;
  double log_sum = 0;
  for (int n = 0; n < max_n; ++n) {
    if (matches[n] == 0) return 0;
    log_sum += std::log(static_cast<double>(matches[n]) / static_cast<double>(totals[n]));
  }
  double bp = c > r ? 1.0 : std::exp(1.0 - static_cast<double>(r) / static_cast<double>(c));
  return bp * std::exp(log_sum / max_n);
}

double item_accuracy(const std::vector<std::vector<SceneItem>>& truth, const std::vector<TokenSeq>& generated,
                     const Vocab& vocab) {
  SACCADE_CHECK(truth.size() == generated.size(), "item_accuracy: {} ground-truth scenes but {} captions",
                truth.size(), generated.size());
  int64_t total = 0, found = 0;
  for (size_t b = 0; b < truth.size(); ++b) {
    ParsedCaption parsed = parse_caption(generated[b], vocab);
    for (const SceneItem& item : truth[b]) {
      ++total;
      found += std::any_of(parsed.items.begin(), parsed.items.end(),
                           [&](const ParsedItem& p) { return p.cell == item.cell && p.label == item.label; });
    }
  }
  SACCADE_CHECK(total > 0, "item_accuracy: no ground-truth items given");
  return static_cast<double>(found) / static_cast<double>(total);
}

double cell_attention_share(const Tensor& weights, int cell) {
  SACCADE_CHECK(weights.defined(), "cell_attention_share: undefined weights");
  SACCADE_CHECK(cell >= 0 && cell < kNumCells, "cell_attention_share: cell {} out of range [0, 4)", cell);
  int64_t n = weights.numel();
  auto g = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
  SACCADE_CHECK(g * g == n && g > 0 && (weights.dim() == 1 || (weights.dim() == 2 && weights.size(0) == g)),
                "cell_attention_share: expected a (G, G) or (G * G) grid of weights, got shape {}",
                weights.shape());
  std::vector<double> w = weights.to_vector<double>();
  // The fraction of grid interval [k, k + 1) (in units of 56 / G pixels) inside [lo, hi) pixels.
  auto overlap = [&](int64_t k, double lo, double hi) {
    double a = static_cast<double>(kSceneSize) * k / g, b = static_cast<double>(kSceneSize) * (k + 1) / g;
    return std::max(0.0, std::min(b, hi) - std::max(a, lo)) / (b - a);
  };
  double r0 = (cell / 2) * kCellSize, c0 = (cell % 2) * kCellSize, inside = 0, total = 0;
  for (int64_t i = 0; i < g; ++i)
    for (int64_t j = 0; j < g; ++j) {
      double v = w[i * g + j];
      total += v;
      inside += v * overlap(i, r0, r0 + kCellSize) * overlap(j, c0, c0 + kCellSize);
    }
  SACCADE_CHECK(total > 0, "cell_attention_share: the weights sum to {}, need a positive total", total);
  return inside / total;
}

Localization attention_localization(const std::vector<TokenSeq>& generated,
                                    const std::vector<Tensor>& attention, const Vocab& vocab) {
  SACCADE_CHECK(generated.size() == attention.size(),
                "attention_localization: {} captions but {} attention tensors", generated.size(),
                attention.size());
  double sum = 0;
  Localization out;
  for (size_t b = 0; b < generated.size(); ++b) {
    const Tensor& a = attention[b];
    SACCADE_CHECK(a.defined() && (a.dim() == 2 || a.dim() == 3),
                  "attention_localization: attention {} must be (T, G, G) or (T, G * G), got shape {}", b,
                  a.defined() ? a.shape() : Shape{});
    for (const ParsedItem& item : parse_caption(generated[b], vocab).items)
      for (int64_t t = item.class_begin; t < item.class_end; ++t) {
        SACCADE_CHECK(t < a.size(0),
                      "attention_localization: caption {} has a class word at step {} but attention "
                      "shape {} has only {} rows",
                      b, t, a.shape(), a.size(0));
        sum += cell_attention_share(a.select(0, t), item.cell);
        ++out.count;
      }
  }
  out.mean = out.count > 0 ? sum / static_cast<double>(out.count) : 0.0;
  return out;
}

}  // namespace saccade::examples
