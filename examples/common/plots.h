#pragma once
// PNG pictures drawn with PLplot (its pngcairo driver, headless): line plots with a legend, attention
// heatmaps with a colour scale, and the captioning attention overlay. Every function throws saccade::Error
// naming the file when it cannot be written or the inputs do not fit. In a build without PLplot (CMake warns;
// e.g. the GPU machines, which have no package manager) the three writers draw nothing: each prints one line
// to stderr naming the file it skipped, and plots_available() is false.
#include <string>
#include <vector>

#include "ops/tensor.h"

namespace saccade::examples {

/// Whether saccade's examples were built with PLplot (false: the writers below skip their files).
bool plots_available();

/// One curve of a line plot. Points: markers only (e.g. training samples).
struct Series {
  enum class Style { Line, Dashed, Points };
  std::vector<double> x, y;  ///< same length
  std::string label;         ///< legend text
  Style style = Style::Line;
};

/// A line plot (e.g. the NW regression: truth curve, training points, prediction curves).
struct LinePlot {
  std::string title, x_label = "x", y_label = "y";
  std::vector<Series> series;
  int width = 800, height = 600;  ///< pixels
  bool legend_right = false;  ///< prefer the top right corner for the legend (falling curves) to the top left
};

/// Writes `plot` as a width x height PNG; the axes span the data. The legend sits in the first corner where
/// it hides no data (the preferred top one, the other top one, then the bottom ones); when data fills every
/// corner, the y axis is lengthened upwards to make room for it in a top corner. A series of one point is
/// drawn as a dot. Throws saccade::Error naming `path` for no series, a series with no values or with x and y
/// of different lengths, a value that is not finite, or a file that can't be written.
void write_line_plot(const std::string& path, const LinePlot& plot);

/// Horizontal stacked bars: one row per category (top to bottom), one coloured segment per part, a legend
/// of the parts (e.g. the profiler's time by op family, forward and backward:
/// examples/common/step_profiler.h).
struct StackedBars {
  std::string title, x_label;
  std::vector<std::string> categories;      ///< row labels
  std::vector<std::string> parts;           ///< legend labels
  std::vector<std::vector<double>> values;  ///< values[category][part], finite and >= 0
  int width = 800, height = 500;
};

/// Writes `bars` as a PNG. Throws saccade::Error naming `path` when it has no category, a row's size is not
/// parts.size(), a value is negative or not finite, or the file can't be written.
void write_stacked_bars(const std::string& path, const StackedBars& bars);

/// A token's text as a heatmap label: a space as U+2423 (an "_" sat on the next label's top and read as a
/// tick mark), a newline as U+21B5, a tab as U+2192; whole UTF-8 characters as they are, and any other byte
/// outside printable ASCII (a control byte, a piece of a character) as '?'.
std::string token_label(const std::string& text);

/// The step k that labels every k-th cell of an axis so that no two labels overlap: the smallest k >= 1 with
/// k * cell_mm >= label_mm, for cells `cell_mm` long and labels `label_mm` across the axis (both in mm; a
/// label's extent along the axis, e.g. its text height). write_heatmap uses it for its token labels. Throws
/// saccade::Error for cell_mm <= 0, label_mm < 0, or a value that is not finite.
int64_t label_step(double cell_mm, double label_mm);

/// Attention weights as heatmaps (as d2l.show_heatmaps): `weights` (Q, K) or (R, C, Q, K), a grid of R x C
/// panels, queries down and keys across, one colour scale (white to dark red over [0, max weight]; values
/// below 0 show as 0, NaN as blank) at the right. `row_labels` (Q entries) / `col_labels` (K entries) label
/// the query rows / key columns when given: every k-th one (label_step), so that labels never overlap, and
/// the margins grow with the longest label so that the axis titles stay inside the image.
struct Heatmap {
  Tensor weights;
  std::string title, x_label = "keys", y_label = "queries";
  std::vector<std::string> row_labels, col_labels;
  int width = 800, height = 600;
};

void write_heatmap(const std::string& path, const Heatmap& heatmap);

/// The captioning attention overlay: one panel per generated word, left to right, each showing the scene
/// `image` ((H, W) or (1, H, W), values in [0, 1], gray) with that word's attention map (attention[t]: (G, G)
/// or (G * G), a grid covering the image) upsampled bilinearly over it in red to yellow, the word written
/// under the panel. Each map is scaled by its own maximum, so a panel shows where that word looked relative
/// to elsewhere (a uniform map tints the whole image). `attention`: (T, G, G) or (T, G * G) with T >=
/// words.size(). The PNG is (words.size() * panel_px) x (panel_px + panel_px / 4) pixels.
void write_attention_overlay(const std::string& path, const Tensor& image,
                             const std::vector<std::string>& words, const Tensor& attention,
                             int panel_px = 160);

/// Bilinear upsampling of a (G, G) grid of cell values to (H, W), sampling at pixel centres (as
/// torch.nn.functional.interpolate(mode="bilinear", align_corners=False)). Returned row-major.
std::vector<double> upsample_bilinear(const std::vector<double>& grid, int64_t g, int64_t h, int64_t w);

}  // namespace saccade::examples
