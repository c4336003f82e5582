#pragma once
// Reading (and, for tests, writing) IDX files, the format of MNIST and Fashion-MNIST (LeCun et al.,
// http://yann.lecun.com/exdb/mnist/): a big-endian header `0 0 type ndims`, then ndims big-endian uint32
// sizes, then the elements row-major. Only type 0x08 (unsigned byte) is supported: that is what the
// (Fashion-)MNIST images and labels use. Files are read through zlib's gzread, so gzip-compressed and plain
// files both work.
#include <cstdint>
#include <string>
#include <vector>

#include "ops/tensor.h"

namespace saccade::examples {

/// The contents of an unsigned-byte IDX file: its sizes and its bytes, row-major.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

/// Reads an IDX file of unsigned bytes (gzip-compressed or plain). When `expected_ndims` > 0 the file must
/// have that many dimensions. Throws saccade::Error naming the file when it cannot be opened, is not valid
/// gzip, has a wrong magic number, a type other than 0x08, a dimension of size 0, is shorter than its header
/// promises, or has bytes left over after the data.
IdxArray read_idx(const std::string& path, int expected_ndims = 0);

/// Writes `data` with sizes `dims` as a gzip-compressed unsigned-byte IDX file (used to make test files).
/// Throws saccade::Error naming the file when data.size() is not the product of dims or the write fails.
void write_idx_gz(const std::string& path, const std::vector<int64_t>& dims,
                  const std::vector<uint8_t>& data);

/// A set of labelled 8-bit grayscale images, as (Fashion-)MNIST stores them.
struct ImageSet {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  ///< (count, rows, cols), row-major, 0 = black, 255 = white
  std::vector<int64_t> labels;  ///< (count)

  const uint8_t* image(int64_t i) const { return pixels.data() + i * rows * cols; }
  /// float32 (count, rows, cols); pixel / 255 when `scale` (values in [0, 1]), else the raw 0..255 values.
  Tensor images_tensor(bool scale = true) const;
  /// int64 (count).
  Tensor labels_tensor() const;
};

/// Reads an images file (3-d IDX: N, rows, cols) and a labels file (1-d IDX: N) into an ImageSet. Throws
/// saccade::Error naming the file on any format problem (see read_idx), when the counts differ, or when a
/// label is not below `num_classes`.
ImageSet load_idx_image_set(const std::string& images_path, const std::string& labels_path,
                            int64_t num_classes = 10);

/// Where Debian's dataset-fashion-mnist package installs the data.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// Loads the Fashion-MNIST (Xiao et al. 2017) `split` ("train": 60000 images, or "t10k": 10000) from `dir`,
/// i.e. `<dir>/<split>-images-idx3-ubyte.gz` and `<dir>/<split>-labels-idx1-ubyte.gz`. Throws saccade::Error
/// for an unknown split or any file problem.
ImageSet load_fashion_mnist(const std::string& split, const std::string& dir = kFashionMnistDir);

}  // namespace saccade::examples
