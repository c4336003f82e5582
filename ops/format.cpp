// Tensor printing, following torch/_tensor_str.py (default print options: precision 4, threshold 1000,
// edgeitems 3, linewidth 80). See ops/format.h for the format.
#include "ops/format.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace saccade::ops {

namespace {

constexpr int64_t kThreshold = 1000, kEdgeItems = 3, kLineWidth = 80;

// The logical indices of dim `d` that are shown: all, or the first and last kEdgeItems when summarising.
std::vector<int64_t> shown(int64_t n, bool summarize) {
  std::vector<int64_t> idx;
  if (summarize && n > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  }
  return idx;
}

// One element, read both ways: int64 beyond 2^53 must not pass through a double.
struct Scalar {
  double d;
  int64_t i;
};

Scalar scalar(const Tensor& t0d) {
  if (t0d.dtype() == DType::Int64) {
    int64_t i = t0d.item<int64_t>();
    return {static_cast<double>(i), i};
  }
  return {t0d.item<double>(), 0};
}

// Formats elements of one tensor in torch's style, with the mode and width chosen over the shown ones.
class Formatter {
 public:
  Formatter(const Tensor& t, bool summarize) : dtype_(t.dtype()) {
    // gather the shown values to choose the mode and the width, as torch's get_summarized_data
    std::vector<Scalar> vals;
    collect(t, summarize, vals);
    if (is_floating(dtype_)) {
      double lo = INFINITY, hi = 0;
      for (Scalar v : vals)
        if (std::isfinite(v.d) && v.d != 0)
          lo = std::min(lo, std::abs(v.d)), hi = std::max(hi, std::abs(v.d));
      sci_ = hi > 0 && (hi / lo > 1000. || hi > 1e8 || lo < 1e-4);
    }
    for (Scalar v : vals) width_ = std::max(width_, raw(v).size());
  }
  std::string operator()(Scalar v) const {
    std::string s = raw(v);
    return std::string(width_ - std::min(width_, s.size()), ' ') + s;
  }
  size_t width() const { return width_; }

 private:
  std::string raw(Scalar v) const {
    if (dtype_ == DType::Bool) return v.d != 0 ? "True" : "False";
    if (!is_floating(dtype_)) return fmt::format("{}", v.i);  // int64
    if (std::isnan(v.d)) return "nan";
    if (std::isinf(v.d)) return v.d > 0 ? "inf" : "-inf";
    return sci_ ? fmt::format("{:.4e}", v.d) : fmt::format("{:.4f}", v.d);
  }
  static void collect(const Tensor& t, bool summarize, std::vector<Scalar>& out) {
    if (t.dim() == 0) {
      out.push_back(scalar(t));
      return;
    }
    for (int64_t i : shown(t.size(0), summarize)) collect(t.select(0, i), summarize, out);
  }

  DType dtype_;
  bool sci_ = false;
  size_t width_ = 0;
};

// torch's _tensor_str_with_formatter: `indent` is the column of the opening bracket of this dim.
void format_dims(const Tensor& t, const Formatter& f, bool summarize, int64_t indent, std::string& out) {
  const int64_t n = t.size(0);
  const bool cut = summarize && n > 2 * kEdgeItems;
  if (t.dim() == 1) {
    std::vector<std::string> items;
    for (int64_t i : shown(n, summarize)) {
      if (cut && i == n - kEdgeItems) items.push_back(" ...");
      items.push_back(f(scalar(t.select(0, i))));
    }
    // wrap rows at kLineWidth: elements_per_line = (linewidth - indent) / (width + 2)
    int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / static_cast<int64_t>(f.width() + 2));
    out += '[';
    for (size_t k = 0; k < items.size(); ++k) {
      if (k > 0 && k % per_line == 0) {
        out += ",\n";
        out.append(indent + 1, ' ');
      } else if (k > 0) {
        out += ", ";
      }
      out += items[k];
    }
    out += ']';
    return;
  }
  std::string sep = ",";
  sep.append(t.dim() - 1, '\n');
  sep.append(indent + 1, ' ');
  out += '[';
  bool first = true;
  for (int64_t i : shown(n, summarize)) {
    if (!first) out += sep;
    if (cut && i == n - kEdgeItems) out += "..." + sep;
    first = false;
    format_dims(t.select(0, i), f, summarize, indent + 1, out);
  }
  out += ']';
}

}  // namespace

std::string format_tensor(const Tensor& t, std::string_view extra) {
  if (!t.defined()) return "tensor(undefined)";
  Tensor c = t.to(Device::cpu());
  std::string out = "tensor(";
  if (c.numel() == 0) {
    out += "[]";
  } else {
    const bool summarize = c.numel() > kThreshold;
    Formatter f(c, summarize);
    if (c.dim() == 0) {
      out += f(scalar(c));
    } else {
      format_dims(c, f, summarize, static_cast<int64_t>(out.size()), out);
    }
  }
  out += fmt::format(", shape={}, dtype={}, device={}", t.shape(), t.dtype(), t.device());
  if (!extra.empty()) out += fmt::format(", {}", extra);
  out += ')';
  return out;
}

}  // namespace saccade::ops

namespace saccade {
std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << ops::format_tensor(t); }
}  // namespace saccade
