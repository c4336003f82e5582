#include "examples/common/png_io.h"

#include <png.h>

#include <algorithm>
#include <cmath>

namespace saccade::examples {

namespace {
png_uint_32 format_of(int channels) {
  return channels == 4 ? PNG_FORMAT_RGBA : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
}
}  // namespace

void write_png(const std::string& path, const PngImage& image) {
  SACCADE_CHECK(image.width > 0 && image.height > 0, "write_png: {}: invalid size {}x{}", path, image.width,
                image.height);
  SACCADE_CHECK(image.channels == 1 || image.channels == 3 || image.channels == 4,
                "write_png: {}: {} channels (use 1, 3 or 4)", path, image.channels);
  SACCADE_CHECK(image.pixels.size() == static_cast<size_t>(image.width) * image.height * image.channels,
                "write_png: {}: {}x{}x{} image but {} pixel bytes", path, image.height, image.width,
                image.channels, image.pixels.size());
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = format_of(image.channels);
  int ok = png_image_write_to_file(&png, path.c_str(), 0, image.pixels.data(), 0, nullptr);
  std::string msg = png.message;
  png_image_free(&png);
  SACCADE_CHECK(ok != 0, "write_png: cannot write {}: {}", path, msg);
}

void write_png(const std::string& path, const Tensor& image) {
  SACCADE_CHECK(image.defined() && is_floating(image.dtype()), "write_png: {}: expected a float image tensor",
                path);
  Tensor t = image.dim() == 2 ? image.unsqueeze(0) : image;
  SACCADE_CHECK(t.dim() == 3 && (t.size(0) == 1 || t.size(0) == 3),
                "write_png: {}: expected an image of shape (H, W), (1, H, W) or (3, H, W), got {}", path,
                image.shape());
  PngImage out;
  out.channels = static_cast<int>(t.size(0));
  out.height = static_cast<int>(t.size(1));
  out.width = static_cast<int>(t.size(2));
  std::vector<double> v = t.permute({1, 2, 0}).to_vector<double>();  // channels last, as PNG rows are
  out.pixels.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out.pixels[i] =
        static_cast<uint8_t>(std::lround(255.0 * std::clamp(std::isnan(v[i]) ? 0.0 : v[i], 0.0, 1.0)));
  write_png(path, out);
}

PngImage read_png(const std::string& path) {
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  SACCADE_CHECK(png_image_begin_read_from_file(&png, path.c_str()) != 0, "read_png: cannot read {}: {}", path,
                png.message);
  PngImage out;
  out.width = static_cast<int>(png.width);
  out.height = static_cast<int>(png.height);
  bool color = (png.format & PNG_FORMAT_FLAG_COLOR) != 0, alpha = (png.format & PNG_FORMAT_FLAG_ALPHA) != 0;
  png.format = alpha ? PNG_FORMAT_RGBA : color ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  out.channels = static_cast<int>(PNG_IMAGE_PIXEL_CHANNELS(png.format));
  out.pixels.resize(PNG_IMAGE_SIZE(png));
  int ok = png_image_finish_read(&png, nullptr, out.pixels.data(), 0, nullptr);
  std::string msg = png.message;
  png_image_free(&png);
  SACCADE_CHECK(ok != 0, "read_png: {} is not a valid PNG: {}", path, msg);
  return out;
}

}  // namespace saccade::examples
