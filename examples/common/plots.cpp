#include "examples/common/plots.h"

#ifdef SACCADE_HAVE_PLPLOT
#include <plplot/plplot.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace saccade::examples {

std::vector<double> upsample_bilinear(const std::vector<double>& grid, int64_t g, int64_t h, int64_t w) {
  SACCADE_CHECK(g > 0 && h > 0 && w > 0 && static_cast<int64_t>(grid.size()) == g * g,
                "upsample_bilinear: a {}x{} grid needs {} values, got {}", g, g, g * g, grid.size());
  // Source coordinate of output pixel i: (i + 0.5) * g / n - 0.5, clamped to [0, g - 1].
  auto coord = [g](int64_t i, int64_t n, int64_t& i0, int64_t& i1, double& f) {
    double s = std::clamp((i + 0.5) * static_cast<double>(g) / static_cast<double>(n) - 0.5, 0.0,
                          static_cast<double>(g - 1));
    i0 = static_cast<int64_t>(std::floor(s));
    i1 = std::min(i0 + 1, g - 1);
    f = s - static_cast<double>(i0);
  };
  std::vector<double> out(static_cast<size_t>(h * w));
  for (int64_t y = 0; y < h; ++y) {
    int64_t r0, r1;
    double fy;
    coord(y, h, r0, r1, fy);
    for (int64_t x = 0; x < w; ++x) {
      int64_t c0, c1;
      double fx;
      coord(x, w, c0, c1, fx);
      double top = grid[r0 * g + c0] * (1 - fx) + grid[r0 * g + c1] * fx;
      double bot = grid[r1 * g + c0] * (1 - fx) + grid[r1 * g + c1] * fx;
      out[y * w + x] = top * (1 - fy) + bot * fy;
    }
  }
  return out;
}

std::string token_label(const std::string& text) {
  std::string label;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    // a whole UTF-8 character (2 to 4 bytes) stays as it is; a lone or cut one is a '?'
    const size_t n = c >= 0xF5 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 1;
    bool whole = n > 1 && i + n <= text.size();
    for (size_t k = 1; whole && k < n; ++k) whole = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    if (whole) {
      label += text.substr(i, n), i += n;
      continue;
    }
    label += c == ' '            ? "\u2423"
             : c == '\n'         ? "\u21b5"
             : c == '\t'         ? "\u2192"
             : c < 32 || c > 126 ? "?"
                                 : std::string(1, static_cast<char>(c));
    ++i;
  }
  return label;
}

int64_t label_step(double cell_mm, double label_mm) {
  SACCADE_CHECK(cell_mm > 0 && label_mm >= 0 && std::isfinite(cell_mm) && std::isfinite(label_mm),
                "label_step: cells of {} mm and labels of {} mm (need cells > 0 and labels >= 0, finite)",
                cell_mm, label_mm);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(label_mm / cell_mm - 1e-9)));
}

namespace {
void check_stacked_bars(const std::string& path, const StackedBars& b) {
  SACCADE_CHECK(!b.categories.empty() && b.values.size() == b.categories.size(),
                "write_stacked_bars: {}: {} categories and {} rows of values", path, b.categories.size(),
                b.values.size());
  for (size_t i = 0; i < b.values.size(); ++i) {
    SACCADE_CHECK(b.values[i].size() == b.parts.size(),
                  "write_stacked_bars: {}: row {} has {} values for {} parts", path, i, b.values[i].size(),
                  b.parts.size());
    for (double v : b.values[i])
      SACCADE_CHECK(std::isfinite(v) && v >= 0, "write_stacked_bars: {}: row {} has the value {}", path, i,
                    v);
  }
}
}  // namespace

#ifdef SACCADE_HAVE_PLPLOT

bool plots_available() { return true; }

namespace {

// One PLplot output stream writing a PNG through the pngcairo driver; ends (and writes) the file when
// destroyed.
class PngStream {
 public:
  PngStream(const char* op, const std::string& path, int width, int height) {
    SACCADE_CHECK(width > 0 && height > 0 && width <= 16384 && height <= 16384, "{}: {}: invalid size {}x{}",
                  op, path, width, height);
    // NOTE: PLplot exits the process when it cannot open its output, so the file is tried here first.
    std::FILE* f = std::fopen(path.c_str(), "wb");
    SACCADE_CHECK(f != nullptr, "{}: cannot write {}", op, path);
    std::fclose(f);
    plmkstrm(&id_);
    plsdev("pngcairo");
    plsfnam(path.c_str());
    plspage(0, 0, width, height, 0, 0);
    // cmap0: 0 white background, 1 black ink, 2.. matplotlib's tab10 for the series.
    static const PLINT r[] = {255, 0, 31, 255, 44, 214, 148, 140, 227, 127, 188, 23};
    static const PLINT g[] = {255, 0, 119, 127, 160, 39, 103, 86, 119, 127, 189, 190};
    static const PLINT b[] = {255, 0, 180, 14, 44, 40, 189, 75, 194, 127, 34, 207};
    plscmap0(r, g, b, 12);
    plinit();
    pladv(0);
  }
  ~PngStream() {
    plsstrm(id_);
    plend1();
  }
  PngStream(const PngStream&) = delete;
  PngStream& operator=(const PngStream&) = delete;

 private:
  PLINT id_ = 0;
};

constexpr int kSeriesColours = 10;

// The legend's distance from the plot's edges (normalised viewport units).
constexpr double kLegendOffset = 0.02;

// Whether a series of `plot` comes within the box [bx0, bx1] x [by0, by1] of normalised viewport
// coordinates, the window being [x0, x1] x [y0, y1]: its points, and its lines sampled finely.
bool hides_data(const LinePlot& plot, double x0, double x1, double y0, double y1, double bx0, double bx1,
                double by0, double by1) {
  auto inside = [&](double x, double y) {
    const double u = (x - x0) / (x1 - x0), v = (y - y0) / (y1 - y0);
    return u >= bx0 && u <= bx1 && v >= by0 && v <= by1;
  };
  for (const Series& s : plot.series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (inside(s.x[i], s.y[i])) return true;
      if (s.style == Series::Style::Points || i + 1 == s.x.size()) continue;
      for (int k = 1; k < 16; ++k) {
        const double t = k / 16.0;
        if (inside(s.x[i] + t * (s.x[i + 1] - s.x[i]), s.y[i] + t * (s.y[i + 1] - s.y[i]))) return true;
      }
    }
  return false;
}

// Where the legend of `plot` goes (a PL_POSITION_* corner) so that it hides no data: the first free corner
// (the top one the plot prefers, the other top one, then the bottom ones); when every corner holds data, the
// top corner that needs the least room and the window's top `y1` raised to give it that room. `w`, `h`: the
// legend's size in normalised viewport units.
PLINT place_legend(const LinePlot& plot, double x0, double x1, double y0, double& y1, double w, double h) {
  const PLINT first = plot.legend_right ? PL_POSITION_RIGHT : PL_POSITION_LEFT;
  const PLINT second = plot.legend_right ? PL_POSITION_LEFT : PL_POSITION_RIGHT;
  const double margin = 0.01;
  auto box_x = [&](PLINT side) {
    return side == PL_POSITION_LEFT ? std::pair(kLegendOffset - margin, kLegendOffset + w + margin)
                                    : std::pair(1 - kLegendOffset - w - margin, 1 - kLegendOffset + margin);
  };
  for (PLINT vertical : {PL_POSITION_TOP, PL_POSITION_BOTTOM})
    for (PLINT side : {first, second}) {
      const auto [bx0, bx1] = box_x(side);
      const double by0 = vertical == PL_POSITION_TOP ? 1 - kLegendOffset - h - margin : 0;
      const double by1 = vertical == PL_POSITION_TOP ? 1 : kLegendOffset + h + margin;
      if (!hides_data(plot, x0, x1, y0, y1, bx0, bx1, by0, by1)) return vertical | side;
    }
  // Raise the top: the highest value under the legend's columns must end below the legend.
  const double room = std::max(1 - kLegendOffset - h - 2 * margin, 0.2);
  double best_y1 = INFINITY;
  PLINT best = PL_POSITION_TOP | first;
  for (PLINT side : {first, second}) {
    const auto [bx0, bx1] = box_x(side);
    double top = y0;
    for (const Series& s : plot.series)
      for (size_t i = 0; i < s.x.size(); ++i) {
        const double u = (s.x[i] - x0) / (x1 - x0);
        if (u >= bx0 && u <= bx1) top = std::max(top, s.y[i]);
        // a line's segment crossing the columns counts at its higher end
        if (i + 1 < s.x.size() && s.style != Series::Style::Points) {
          const double u2 = (s.x[i + 1] - x0) / (x1 - x0);
          if (std::min(u, u2) <= bx1 && std::max(u, u2) >= bx0) top = std::max({top, s.y[i], s.y[i + 1]});
        }
      }
    const double needed = y0 + (top - y0) / room;
    if (needed < best_y1) best_y1 = needed, best = PL_POSITION_TOP | side;
  }
  y1 = std::max(y1, best_y1);
  return best;
}

// An image of nx x ny cells for plimagefr, x index first. plimagefr puts value [i][j] at grid corner (i, j)
// and fills the quad up to corner (i + 1, j + 1), so nx x ny cells need (nx + 1) x (ny + 1) values: the last
// column and row repeat their neighbours (plimage does the same internally, but rescales colours to the
// data's min and max, which would break a shared colour scale).
class CellImage {
 public:
  CellImage(int64_t nx, int64_t ny)
      : nx_(nx), ny_(ny), v_(static_cast<size_t>((nx + 1) * (ny + 1))), rows_(nx + 1) {
    for (int64_t i = 0; i <= nx; ++i) rows_[i] = v_.data() + i * (ny + 1);
  }
  PLFLT& at(int64_t x, int64_t y) { return rows_[x][y]; }
  /// Draws the cells over world [x0, x1] x [y0, y1] with cmap1 spanning values [vmin, vmax].
  void draw(double x0, double x1, double y0, double y1, double vmin, double vmax) {
    for (int64_t i = 0; i < nx_; ++i) rows_[i][ny_] = rows_[i][ny_ - 1];
    for (int64_t j = 0; j <= ny_; ++j) rows_[nx_][j] = rows_[nx_ - 1][j];
    plimagefr(rows_.data(), static_cast<PLINT>(nx_ + 1), static_cast<PLINT>(ny_ + 1), x0, x1, y0, y1, vmin,
              vmax, vmin, vmax, nullptr, nullptr);
  }

 private:
  int64_t nx_, ny_;
  std::vector<PLFLT> v_;
  std::vector<PLFLT*> rows_;
};

// The width of `text` at `scale` times the character height, in normalised viewport units: measured as a
// one-entry legend drawn in the background colour (Debian's PLplot 5.15 has no string-length call), so call
// it before anything is drawn where the legend's corner sits.
double text_width(const std::string& text, double scale) {
  PLFLT w = 0, h = 0;
  const PLINT none = PL_LEGEND_NONE, background = 0;
  const char* t = text.c_str();
  pllegend(&w, &h, PL_LEGEND_NONE, PL_POSITION_TOP | PL_POSITION_LEFT | PL_POSITION_INSIDE, 0, 0, 0, 0, 0, 0,
           0, 0, 1, &none, 0.0, scale, 1.0, 0.0, &background, &t, nullptr, nullptr, nullptr, nullptr, nullptr,
           nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  return w;
}

// `text` cut at a UTF-8 character boundary to at most `bytes` bytes, with "..." after it.
std::string cut_text(const std::string& text, size_t bytes) {
  while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
  return text.substr(0, bytes) + "...";
}

// The character scale at which every one of `texts` (at `scale` now) is at most `room` wide, but not below
// `min_scale`; the texts still wider at that scale are cut ("...") until they fit. A label of any length
// stays inside the picture.
double fit_texts(std::vector<std::string>& texts, double scale, double min_scale, double room) {
  double widest = 0;
  for (const std::string& t : texts) widest = std::max(widest, text_width(t, scale));
  if (widest > room) scale = std::max(min_scale, scale * room / widest);
  for (std::string& t : texts) {
    const std::string whole = t;
    for (size_t keep = whole.size(); keep > 1 && text_width(t, scale) > room;)
      t = cut_text(whole, keep = keep * 9 / 10);
  }
  return scale;
}

// A title laid out above the viewport: one line at the normal size when it fits, else smaller, else two lines
// split at the space nearest its middle (each cut with "..." if it still does not fit).
struct TitleLines {
  std::vector<std::string> lines;
  double scale = 1.0;
};

// Measures (so call it before drawing: see text_width) and lays out `title`.
TitleLines fit_title(const std::string& title) {
  const double room = 1.1;  // the viewport's width and a little of the margins (the title is centred)
  TitleLines t;
  if (title.empty()) return t;
  t.lines = {title};
  if (text_width(title, 0.8) <= room) {
    t.scale = fit_texts(t.lines, 1.0, 0.8, room);
    return t;
  }
  const size_t middle = title.size() / 2;
  size_t best = std::string::npos;
  auto distance = [&](size_t i) { return i > middle ? i - middle : middle - i; };
  for (size_t i = 0; i < title.size(); ++i)
    if (title[i] == ' ' && (best == std::string::npos || distance(i) < distance(best))) best = i;
  if (best != std::string::npos) t.lines = {title.substr(0, best), title.substr(best + 1)};
  t.scale = fit_texts(t.lines, 0.8, 0.8, room);
  return t;
}

// Draws the lines of fit_title above the viewport (the first line higher when there are two).
void draw_title(const TitleLines& t) {
  plschr(0, t.scale);
  for (size_t i = 0; i < t.lines.size(); ++i)
    plmtex("t", (t.lines.size() == 1 ? 2.0 : i == 0 ? 2.9 : 1.6) / t.scale, 0.5, 0.5, t.lines[i].c_str());
  plschr(0, 1.0);
}

// Integer tick spacing giving at most about 8 labels over n cells.
double tick_step(int64_t n) { return static_cast<double>(std::max<int64_t>(1, (n + 7) / 8)); }

}  // namespace

void write_line_plot(const std::string& path, const LinePlot& plot) {
  SACCADE_CHECK(!plot.series.empty(), "write_line_plot: {}: no series to plot", path);
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const Series& s : plot.series) {
    SACCADE_CHECK(s.x.size() == s.y.size() && !s.x.empty(),
                  "write_line_plot: {}: series '{}' has {} x and {} y values", path, s.label, s.x.size(),
                  s.y.size());
    for (size_t i = 0; i < s.x.size(); ++i) {
      SACCADE_CHECK(std::isfinite(s.x[i]) && std::isfinite(s.y[i]),
                    "write_line_plot: {}: series '{}' has a "
                    "non-finite value at index {}",
                    path, s.label, i);
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]), y0 = std::min(y0, s.y[i]),
      y1 = std::max(y1, s.y[i]);
    }
  }
  if (x1 == x0) x0 -= 0.5, x1 += 0.5;
  if (y1 == y0) y0 -= 0.5, y1 += 0.5;
  // a series drawn as dots (points, or a lone point) keeps its dots inside the box at the x ends too
  auto dotted = [](const Series& s) { return s.style == Series::Style::Points || s.x.size() == 1; };
  if (std::any_of(plot.series.begin(), plot.series.end(), dotted)) {
    const double x_pad = 0.015 * (x1 - x0);
    x0 -= x_pad, x1 += x_pad;
  }
  const double pad = 0.05 * (y1 - y0);
  const double ylo = y0 - pad;
  double yhi = y1 + pad;
  PngStream stream("write_line_plot", path, plot.width, plot.height);
  plvpor(0.1, 0.95, 0.12, 0.92);  // the x axis title's parentheses need the bottom 12 %
  const auto n = static_cast<PLINT>(plot.series.size());
  std::vector<PLINT> opts(n), colours(n), styles(n), symbol_numbers(n, 1);
  std::vector<PLFLT> widths(n, 1.5), symbol_scales(n, 1.0);
  std::vector<const char*> text(n), symbols(n, "#(840)");  // Hershey 840: a filled circle
  for (PLINT i = 0; i < n; ++i) {
    const Series& s = plot.series[i];
    colours[i] = 2 + i % kSeriesColours;
    styles[i] = s.style == Series::Style::Dashed ? 2 : 1;
    opts[i] = dotted(s) ? PL_LEGEND_SYMBOL : PL_LEGEND_LINE;
  }
  // Labels of any length stay inside the box: smaller text first, then cut ("...").
  std::vector<std::string> labels;
  for (const Series& s : plot.series) labels.push_back(s.label);
  plwind(x0, x1, ylo, yhi);
  const double label_room = 1 - 2 * kLegendOffset - 0.08 - 0.06;  // the line sample and the gaps beside it
  const double text_scale = fit_texts(labels, 0.8, 0.55, label_room);
  const TitleLines title = fit_title(plot.title);
  if (title.lines.size() == 2) plvpor(0.1, 0.95, 0.12, 0.88);  // room above the frame for the second line
  for (PLINT i = 0; i < n; ++i) text[i] = labels[i].c_str();
  auto legend = [&](PLINT position, PLINT opt, const PLINT* opt_array, const PLINT* text_colours) {
    PLFLT w = 0, h = 0;
    pllegend(&w, &h, opt, position | PL_POSITION_INSIDE, kLegendOffset, kLegendOffset, 0.08, 0, 1, 1, 0, 0, n,
             opt_array, 1.0, text_scale, 2.0, 0.0, text_colours, text.data(), nullptr, nullptr, nullptr,
             nullptr, colours.data(), styles.data(), widths.data(), colours.data(), symbol_scales.data(),
             symbol_numbers.data(), symbols.data());
    return std::pair<double, double>(w, h);
  };
  // The legend's size, measured by drawing its text in the background colour on the blank page.
  plwind(x0, x1, ylo, yhi);
  const std::vector<PLINT> none(n, PL_LEGEND_NONE), blank(n, 0);
  const auto [legend_w, legend_h] =
      legend(PL_POSITION_TOP | PL_POSITION_LEFT, PL_LEGEND_NONE, none.data(), blank.data());
  const PLINT corner = place_legend(plot, x0, x1, ylo, yhi, legend_w, legend_h);
  plwind(x0, x1, ylo, yhi);
  plcol0(1);
  plbox("bcnst", 0, 0, "bcnstv", 0, 0);
  pllab(plot.x_label.c_str(), plot.y_label.c_str(), "");
  draw_title(title);
  for (PLINT i = 0; i < n; ++i) {
    const Series& s = plot.series[i];
    plcol0(colours[i]);
    pllsty(styles[i]);
    plwidth(1.5);
    // a line through one point draws nothing: show a lone point as a dot
    if (dotted(s))
      plstring(static_cast<PLINT>(s.x.size()), s.x.data(), s.y.data(), symbols[i]);
    else
      plline(static_cast<PLINT>(s.x.size()), s.x.data(), s.y.data());
  }
  pllsty(1);
  legend(corner, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX, opts.data(), colours.data());
}

void write_stacked_bars(const std::string& path, const StackedBars& b) {
  check_stacked_bars(path, b);
  const auto n = static_cast<PLINT>(b.categories.size()), parts = static_cast<PLINT>(b.parts.size());
  double xmax = 0;
  for (const auto& row : b.values) {
    double s = 0;
    for (double v : row) s += v;
    xmax = std::max(xmax, s);
  }
  if (xmax <= 0) xmax = 1;
  PngStream stream("write_stacked_bars", path, b.width, b.height);
  plvpor(0.2, 0.95, 0.12, 0.9);
  plwind(0, xmax * 1.05, 0, n);
  plcol0(1);
  plbox("bcnstg", 0, 0, "bc", 0, 0);
  pllab(b.x_label.c_str(), "", b.title.c_str());
  for (PLINT i = 0; i < n; ++i) {
    const double y0 = n - i - 0.85, y1 = n - i - 0.15;
    double x = 0;
    for (PLINT p = 0; p < parts; ++p) {
      const double w = b.values[i][p];
      if (w > 0) {
        PLFLT xs[] = {x, x + w, x + w, x}, ys[] = {y0, y0, y1, y1};
        plcol0(2 + p % kSeriesColours);
        plfill(4, xs, ys);
      }
      x += w;
    }
    plcol0(1);
    plmtex("lv", 0.5, (n - i - 0.5) / n, 1.0, b.categories[i].c_str());
  }
  std::vector<PLINT> opts(parts, PL_LEGEND_COLOR_BOX), colours(parts), patterns(parts, 0);
  std::vector<PLFLT> scales(parts, 0.8), widths(parts, 1.0);
  std::vector<const char*> text(parts);
  for (PLINT p = 0; p < parts; ++p) colours[p] = 2 + p % kSeriesColours, text[p] = b.parts[p].c_str();
  PLFLT legend_w = 0, legend_h = 0;
  pllegend(&legend_w, &legend_h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
           PL_POSITION_BOTTOM | PL_POSITION_RIGHT | PL_POSITION_INSIDE, 0.02, 0.02, 0.05, 0, 1, 1, 0, 0,
           parts, opts.data(), 1.0, 0.8, 2.0, 0.0, colours.data(), text.data(), colours.data(),
           patterns.data(), scales.data(), widths.data(), nullptr, nullptr, nullptr, nullptr, nullptr,
           nullptr, nullptr);
}

void write_heatmap(const std::string& path, const Heatmap& h) {
  SACCADE_CHECK(h.weights.defined() && (h.weights.dim() == 2 || h.weights.dim() == 4),
                "write_heatmap: {}: weights must be (Q, K) or (R, C, Q, K), got shape {}", path,
                h.weights.defined() ? h.weights.shape() : Shape{});
  Tensor w4 = h.weights.dim() == 2 ? h.weights.unsqueeze(0).unsqueeze(0) : h.weights;
  const int64_t R = w4.size(0), C = w4.size(1), Q = w4.size(2), K = w4.size(3);
  SACCADE_CHECK(R * C * Q * K > 0, "write_heatmap: {}: empty weights of shape {}", path, h.weights.shape());
  SACCADE_CHECK(h.row_labels.empty() || static_cast<int64_t>(h.row_labels.size()) == Q,
                "write_heatmap: {}: {} row labels for {} queries", path, h.row_labels.size(), Q);
  SACCADE_CHECK(h.col_labels.empty() || static_cast<int64_t>(h.col_labels.size()) == K,
                "write_heatmap: {}: {} column labels for {} keys", path, h.col_labels.size(), K);
  std::vector<double> v = w4.to_vector<double>();
  double vmax = 0;
  for (double x : v) vmax = std::max(vmax, std::isfinite(x) ? x : 0.0);
  if (vmax <= 0) vmax = 1;

  PngStream stream("write_heatmap", path, h.width, h.height);
  // cmap1: matplotlib's "Reds" (as d2l.show_heatmaps), white to dark red.
  PLFLT pos[] = {0, 0.5, 1}, red[] = {1.0, 0.98, 0.40}, green[] = {0.96, 0.42, 0.0},
        blue[] = {0.94, 0.29, 0.05};
  plscmap1n(256);
  plscmap1l(1, 3, pos, red, green, blue, nullptr);
  // The axis titles sit beyond the tick labels, and the margins hold them. plgchr gives the character height
  // in mm, plgspa the page's size in mm. A tick label is drawn at 0.8 of the character height; its width is
  // taken as 0.9 character heights a character (DejaVu Sans' widest letters, M and W, are about that), so
  // that a label of wide letters still leaves its axis title inside the image.
  PLFLT default_height = 0, height = 0, page_x0 = 0, page_x1 = 0, page_y0 = 0, page_y1 = 0;
  plgchr(&default_height, &height);
  plgspa(&page_x0, &page_x1, &page_y0, &page_y1);
  const double page_w = page_x1 - page_x0, page_h = page_y1 - page_y0;
  auto longest = [](const std::vector<std::string>& labels) {
    size_t n = 0;
    for (const std::string& l : labels)  // characters, not bytes: a UTF-8 label ("\u2423") is one wide
      n = std::max<size_t>(n, std::count_if(l.begin(), l.end(), [](char c) { return (c & 0xC0) != 0x80; }));
    return static_cast<double>(n);
  };
  const double y_label_at = h.row_labels.empty() ? 3.5 : 2.0 + 0.8 * 0.9 * longest(h.row_labels);
  const double x_label_at = h.col_labels.empty() ? 3.0 : 2.5 + 0.8 * 0.9 * longest(h.col_labels);
  const double left = std::max(0.12, (y_label_at + 1.0) * height / page_w);
  const double bottom = std::max(0.14, (x_label_at + 1.0) * height / page_h);
  const double right = 0.84, top = 0.9, gap = 0.03;
  const double pw = (right - left - gap * (C - 1)) / C, ph = (top - bottom - gap * (R - 1)) / R;
  // Every k-th token is labelled: a row label (horizontal text) and a column label (vertical text) each
  // take one character height across the axis, plus a quarter of one between neighbours.
  const double label_mm = 1.25 * 0.8 * height;
  const int64_t col_step = label_step(pw * page_w / static_cast<double>(K), label_mm);
  const int64_t row_step = label_step(ph * page_h / static_cast<double>(Q), label_mm);
  plschr(0, 0.8);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      double vx = left + c * (pw + gap), vy = top - (r + 1) * ph - r * gap;
      plvpor(vx, vx + pw, vy, vy + ph);
      plwind(-0.5, K - 0.5, Q - 0.5, -0.5);  // inverted y: query 0 at the top, as a matrix is printed
      CellImage img(K, Q);
      for (int64_t q = 0; q < Q; ++q)
        for (int64_t k = 0; k < K; ++k)
          img.at(k, q) = std::clamp(v[((r * C + c) * Q + q) * K + k], 0.0, vmax);
      img.draw(-0.5, K - 0.5, -0.5, Q - 0.5, 0, vmax);
      plcol0(1);
      bool x_numbers = r == R - 1 && h.col_labels.empty(), y_numbers = c == 0 && h.row_labels.empty();
      plbox(x_numbers ? "bcnst" : "bc", tick_step(K), 0, y_numbers ? "bcnstv" : "bc", tick_step(Q), 0);
      if (r == R - 1)
        for (int64_t k = 0; k < static_cast<int64_t>(h.col_labels.size()); k += col_step)
          plmtex("bv", 0.5, (k + 0.5) / K, 1.0, h.col_labels[k].c_str());
      if (c == 0)
        for (int64_t q = 0; q < static_cast<int64_t>(h.row_labels.size()); q += row_step)
          plmtex("lv", 0.5, 1.0 - (q + 0.5) / Q, 1.0, h.row_labels[q].c_str());
    }
  plschr(0, 1.0);
  plvpor(left, right, bottom, top);
  plmtex("t", 1.5, 0.5, 0.5, h.title.c_str());
  plmtex("b", x_label_at, 0.5, 0.5, h.x_label.c_str());
  plmtex("l", y_label_at, 0.5, 0.5, h.y_label.c_str());
  // The colour scale.
  plvpor(0.88, 0.91, bottom, top);
  plwind(0, 1, 0, vmax);
  CellImage bar(1, 256);
  for (int j = 0; j < 256; ++j) bar.at(0, j) = vmax * j / 255.0;
  bar.draw(0, 1, 0, vmax, 0, vmax);
  plcol0(1);
  plschr(0, 0.8);
  plbox("bc", 0, 0, "bcmstv", 0, 0);
}

void write_attention_overlay(const std::string& path, const Tensor& image,
                             const std::vector<std::string>& words, const Tensor& attention, int panel_px) {
  SACCADE_CHECK(image.defined() && (image.dim() == 2 || (image.dim() == 3 && image.size(0) == 1)),
                "write_attention_overlay: {}: image must be (H, W) or (1, H, W), got shape {}", path,
                image.defined() ? image.shape() : Shape{});
  SACCADE_CHECK(!words.empty(), "write_attention_overlay: {}: no words given", path);
  SACCADE_CHECK(attention.defined() && (attention.dim() == 2 || attention.dim() == 3),
                "write_attention_overlay: {}: attention must be (T, G, G) or (T, G * G), got shape {}", path,
                attention.defined() ? attention.shape() : Shape{});
  const int64_t T = static_cast<int64_t>(words.size()), cells = attention.numel() / attention.size(0);
  const auto G = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(cells))));
  SACCADE_CHECK(
      attention.size(0) >= T && G * G == cells && (attention.dim() == 2 || attention.size(1) == G),
      "write_attention_overlay: {}: attention of shape {} does not hold a square grid for each of {} words",
      path, attention.shape(), T);
  SACCADE_CHECK(panel_px >= 32, "write_attention_overlay: {}: panel_px must be at least 32, got {}", path,
                panel_px);
  Tensor img2 = image.dim() == 3 ? image.select(0, 0) : image;
  const int64_t H = img2.size(0), W = img2.size(1);
  std::vector<double> pixels = img2.to_vector<double>(), att = attention.to_vector<double>();

  PngStream stream("write_attention_overlay", path, static_cast<int>(T * panel_px), panel_px + panel_px / 4);
  PLFLT pos[] = {0, 1};
  PLFLT gray[] = {0, 1}, alpha_img[] = {1, 1};
  // Attention colours: transparent red at 0 to yellow at 75 % opacity at the map's maximum.
  PLFLT red[] = {1, 1}, green[] = {0, 1}, blue[] = {0, 0}, alpha_att[] = {0, 0.75};
  plscmap1n(256);
  plschr(0, panel_px / 160.0);
  CellImage scene(W, H), heat(W, H);
  for (int64_t r = 0; r < H; ++r)
    for (int64_t c = 0; c < W; ++c) scene.at(c, H - 1 - r) = std::clamp(pixels[r * W + c], 0.0, 1.0);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> grid(att.begin() + t * cells, att.begin() + (t + 1) * cells);
    std::vector<double> up = upsample_bilinear(grid, G, H, W);
    double peak = *std::max_element(up.begin(), up.end());
    for (int64_t r = 0; r < H; ++r)
      for (int64_t c = 0; c < W; ++c) heat.at(c, H - 1 - r) = peak > 0 ? up[r * W + c] / peak : 0.0;
    const double x0 = static_cast<double>(t) / T, x1 = static_cast<double>(t + 1) / T;
    plvpas(x0 + 0.05 / T, x1 - 0.05 / T, 0.2, 0.98, 1.0);
    plwind(0, W, 0, H);
    plscmap1la(1, 2, pos, gray, gray, gray, alpha_img, nullptr);
    scene.draw(0, W, 0, H, 0, 1);
    plscmap1la(1, 2, pos, red, green, blue, alpha_att, nullptr);
    heat.draw(0, W, 0, H, 0, 1);
    plcol0(1);
    plbox("bc", 0, 0, "bc", 0, 0);
    plmtex("b", 1.4, 0.5, 0.5, words[t].c_str());
  }
}

#else  // built without PLplot: nothing is drawn, each call says so

bool plots_available() { return false; }

namespace {
void skipped(const char* op, const std::string& path) {
  std::fprintf(stderr, "%s: %s not drawn (saccade's examples were built without PLplot)\n", op, path.c_str());
}
}  // namespace

void write_line_plot(const std::string& path, const LinePlot&) { skipped("write_line_plot", path); }
void write_heatmap(const std::string& path, const Heatmap&) { skipped("write_heatmap", path); }
void write_stacked_bars(const std::string& path, const StackedBars& b) {
  check_stacked_bars(path, b);
  skipped("write_stacked_bars", path);
}
void write_attention_overlay(const std::string& path, const Tensor&, const std::vector<std::string>&,
                             const Tensor&, int) {
  skipped("write_attention_overlay", path);
}

#endif  // SACCADE_HAVE_PLPLOT

}  // namespace saccade::examples
