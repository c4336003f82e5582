#pragma once
// PNG files through libpng's simplified API (png_image_*, libpng 1.6).
#include <cstdint>
#include <string>
#include <vector>

#include "ops/tensor.h"

namespace saccade::examples {

/// An 8-bit image: `channels` 1 (gray), 3 (RGB) or 4 (RGBA), pixels row-major (height, width, channels).
struct PngImage {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

/// Writes `image` as an 8-bit PNG. Throws saccade::Error naming the file when the size or channel count is
/// invalid, pixels.size() != width * height * channels, or libpng fails (e.g. the directory does not exist).
void write_png(const std::string& path, const PngImage& image);

/// Writes a float image with values in [0, 1] (clamped) as an 8-bit PNG: (H, W) or (1, H, W) gray, (3, H, W)
/// RGB (channels first, as the scene tensors). Throws saccade::Error for another shape or a non-float dtype.
void write_png(const std::string& path, const Tensor& image);

/// Reads a PNG into 8-bit pixels with its own channel count mapped to 1 (gray), 2 (gray + alpha, returned as
/// 4: RGBA), 3 (RGB) or 4 (RGBA). Throws saccade::Error naming the file when it is missing or not a valid
/// PNG.
PngImage read_png(const std::string& path);

}  // namespace saccade::examples
