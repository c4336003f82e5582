#include "examples/common/idx.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <memory>

#include "ops/creation.h"

namespace saccade::examples {

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 40;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

// Reads exactly n bytes or throws naming the file (truncated or corrupt gzip).
void read_exact(gzFile f, const std::string& path, void* dst, size_t n, const char* what) {
  auto* p = static_cast<unsigned char*>(dst);
  while (n > 0) {
    unsigned chunk = n > (1u << 30) ? (1u << 30) : static_cast<unsigned>(n);
    int got = gzread(f, p, chunk);
    if (got < 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      throw Error(fmt::format("read_idx: {}: corrupt gzip data while reading the {} ({})", path, what, msg));
    }
    SACCADE_CHECK(got > 0, "read_idx: {}: file ends early while reading the {}", path, what);
    p += got;
    n -= static_cast<size_t>(got);
  }
}

}  // namespace

IdxArray read_idx(const std::string& path, int expected_ndims) {
  GzFile f(gzopen(path.c_str(), "rb"));
  SACCADE_CHECK(f != nullptr, "read_idx: cannot open {}", path);
  unsigned char magic[4];
  read_exact(f.get(), path, magic, 4, "magic number");
  SACCADE_CHECK(
      magic[0] == 0 && magic[1] == 0,
      "read_idx: {}: bad magic number {:02x}{:02x}{:02x}{:02x} (an IDX file starts with two zero bytes)",
      path, magic[0], magic[1], magic[2], magic[3]);
  SACCADE_CHECK(magic[2] == 0x08,
                "read_idx: {}: element type 0x{:02x} is not supported (only 0x08, unsigned byte)", path,
                magic[2]);
  int ndims = magic[3];
  SACCADE_CHECK(ndims >= 1, "read_idx: {}: the header declares 0 dimensions", path);
  SACCADE_CHECK(expected_ndims <= 0 || ndims == expected_ndims,
                "read_idx: {}: expected {} dimensions, the file has {}", path, expected_ndims, ndims);
  IdxArray out;
  int64_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    unsigned char b[4];
    read_exact(f.get(), path, b, 4, "dimension sizes");
    int64_t size = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | int64_t{b[3]};
    SACCADE_CHECK(size > 0, "read_idx: {}: dimension {} has size 0", path, d);
    SACCADE_CHECK(size <= kMaxElements / total, "read_idx: {}: the header declares more than 2^40 elements",
                  path);
    total *= size;
    out.dims.push_back(size);
  }
  // NOTE: read in chunks growing from 64 KiB to 16 MiB, so a corrupt header promising terabytes fails at
  // the end of the file, not in malloc, and a short file costs little.
  constexpr int64_t kChunk = int64_t{1} << 24;
  for (int64_t done = 0; done < total;) {
    int64_t n = std::min({kChunk, std::max(done, int64_t{1} << 16), total - done});
    out.data.resize(static_cast<size_t>(done + n));
    read_exact(f.get(), path, out.data.data() + done, static_cast<size_t>(n), "data");
    done += n;
  }
  unsigned char extra;
  int more = gzread(f.get(), &extra, 1);
  SACCADE_CHECK(more >= 0, "read_idx: {}: corrupt gzip data after the elements", path);
  SACCADE_CHECK(more == 0, "read_idx: {}: the file is longer than its header declares ({} elements)", path,
                total);
  return out;
}

void write_idx_gz(const std::string& path, const std::vector<int64_t>& dims,
                  const std::vector<uint8_t>& data) {
  SACCADE_CHECK(!dims.empty() && dims.size() < 256, "write_idx_gz: {}: need 1 to 255 dimensions, got {}",
                path, dims.size());
  int64_t total = 1;
  for (int64_t d : dims) {
    SACCADE_CHECK(d >= 0 && d <= UINT32_MAX, "write_idx_gz: {}: dimension size {} out of range", path, d);
    total *= d;
  }
  SACCADE_CHECK(static_cast<size_t>(total) == data.size(),
                "write_idx_gz: {}: dims {} hold {} elements, data has {}", path, fmt::join(dims, "x"), total,
                data.size());
  std::vector<unsigned char> bytes = {0, 0, 0x08, static_cast<unsigned char>(dims.size())};
  for (int64_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<unsigned char>((d >> shift) & 0xff));
  bytes.insert(bytes.end(), data.begin(), data.end());
  GzFile f(gzopen(path.c_str(), "wb"));
  SACCADE_CHECK(f != nullptr, "write_idx_gz: cannot open {} for writing", path);
  int wrote = gzwrite(f.get(), bytes.data(), static_cast<unsigned>(bytes.size()));
  SACCADE_CHECK(wrote == static_cast<int>(bytes.size()), "write_idx_gz: {}: write failed", path);
  SACCADE_CHECK(gzclose(f.release()) == Z_OK, "write_idx_gz: {}: closing the file failed", path);
}

Tensor ImageSet::images_tensor(bool scale) const {
  Tensor t = ops::empty({count, rows, cols}, DType::Float32);
  float* p = t.data<float>();
  const float k = scale ? 1.0f / 255.0f : 1.0f;
  for (size_t i = 0; i < pixels.size(); ++i) p[i] = static_cast<float>(pixels[i]) * k;
  return t;
}

Tensor ImageSet::labels_tensor() const { return ops::from_vector(labels, {count}); }

ImageSet load_idx_image_set(const std::string& images_path, const std::string& labels_path,
                            int64_t num_classes) {
  IdxArray images = read_idx(images_path, 3);
  IdxArray labels = read_idx(labels_path, 1);
  SACCADE_CHECK(images.dims[0] == labels.dims[0],
                "load_idx_image_set: {} holds {} images but {} holds {} labels", images_path, images.dims[0],
                labels_path, labels.dims[0]);
  ImageSet set;
  set.count = images.dims[0], set.rows = images.dims[1], set.cols = images.dims[2];
  set.pixels = std::move(images.data);
  set.labels.reserve(labels.data.size());
  for (size_t i = 0; i < labels.data.size(); ++i) {
    SACCADE_CHECK(labels.data[i] < num_classes,
                  "load_idx_image_set: {}: label {} at index {} is not below {}", labels_path, labels.data[i],
                  i, num_classes);
    set.labels.push_back(labels.data[i]);
  }
  return set;
}

ImageSet load_fashion_mnist(const std::string& split, const std::string& dir) {
  SACCADE_CHECK(split == "train" || split == "t10k",
                "load_fashion_mnist: unknown split '{}' (use train or t10k)", split);
  return load_idx_image_set(dir + "/" + split + "-images-idx3-ubyte.gz",
                            dir + "/" + split + "-labels-idx1-ubyte.gz");
}

}  // namespace saccade::examples
