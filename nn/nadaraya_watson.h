#pragma once
// Nadaraya-Watson kernel regression (Nadaraya 1964, Watson 1964; d2l section 11.2, Attention Pooling by
// Similarity): the oldest attention. A prediction at query x is Σ_i α(x, x_i) y_i with weights
// α(x, x_i) = k((x - x_i) / h) / Σ_j k((x - x_j) / h) — the keys are the training inputs x_i, the values
// their targets y_i.
#include <cstdint>
#include <memory>

#include "autograd/variable.h"
#include "nn/module.h"
#include "ops/random.h"

namespace saccade::nn {

/// The similarity kernels of d2l section 11.2, as functions of u = (q - k) / width:
///   Gaussian     exp(-u² / 2)            (the weights are computed as a softmax of -u² / 2, so far-away
///                                          queries never give 0 / 0)
///   Boxcar       1 if |u| < 1, else 0
///   Epanechnikov max(0, 1 - u²)           (the 3/4 constant cancels in the normalisation)
///   Triangular   max(0, 1 - |u|)          (what d2l's code calls `epanechikov`)
///   Constant     1                        (every query predicts the mean of the values)
enum class Kernel { Gaussian, Boxcar, Epanechnikov, Triangular, Constant };

/// A prediction and the attention weights that made it.
struct NadarayaWatsonOutput {
  Variable predictions;  // (Q)
  Variable weights;      // (Q, K), rows sum to 1 (or are all 0, see NadarayaWatson)
};

/// Nonparametric Nadaraya-Watson regression with a fixed kernel and bandwidth `width` > 0 (d2l 11.2.2).
/// No parameters; differentiable in queries, keys and values (the Boxcar and Constant kernels have zero
/// derivative in the queries and keys).
class NadarayaWatson : public Module {
 public:
  /// Throws saccade::Error naming "NadarayaWatson" when width <= 0.
  explicit NadarayaWatson(Kernel kernel = Kernel::Gaussian, double width = 1.0);

  /// queries (Q), keys (K), values (K), one float dtype -> predictions (Q) and weights (Q, K). A query with
  /// no key inside a compact kernel's support (Boxcar, Epanechnikov, Triangular) gets all-zero weights and
  /// prediction 0, never NaN. Throws saccade::Error naming "NadarayaWatson" and the shapes for inputs that
  /// are not 1-d or keys and values of different lengths.
  NadarayaWatsonOutput forward(const Variable& queries, const Variable& keys, const Variable& values);
  /// The weights (Q, K) of the last forward (undefined before the first).
  Tensor attention_weights() const { return weights_; }

  Kernel kernel;
  double width;

 private:
  Tensor weights_;
};

/// Nadaraya-Watson regression with a learnable bandwidth (d2l section 11.2 in its first edition, "attention
/// pooling with parameters"): α(q, k_i) = softmax_i(-((q - k_i) w)² / 2), prediction Σ_i α(q, k_i) v_i.
///
/// Parameter: `w` of shape (1), initialised U(0, 1) from `gen` (the default generator when null), as d2l's
/// torch.rand((1,)).
class ParametricNadarayaWatson : public Module {
 public:
  explicit ParametricNadarayaWatson(Generator* gen = nullptr);

  /// queries (Q); keys and values either (K), shared by every query, or (Q, K), one row per query (d2l's
  /// leave-one-out training keys); one float dtype -> predictions (Q) and weights (Q, K). Throws
  /// saccade::Error naming "ParametricNadarayaWatson" and the shapes for other ranks or mismatched sizes.
  NadarayaWatsonOutput forward(const Variable& queries, const Variable& keys, const Variable& values);
  /// The weights (Q, K) of the last forward (undefined before the first).
  Tensor attention_weights() const { return weights_; }

  Variable w;

 private:
  Tensor weights_;
};

}  // namespace saccade::nn
