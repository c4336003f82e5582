// NumPy .npy reading and writing. The format (numpy/lib/format.py): the magic "\x93NUMPY", a major and minor
// version byte, the header length (uint16 little-endian in 1.0, uint32 in 2.0 and 3.0), then an ASCII Python
// dict literal {'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and ending in
// '\n' so that the data starts at a multiple of 64 bytes; then the raw elements.
#include "ops/io.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

namespace saccade::ops {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

// The supported descrs, for error messages: '<f4', '<f8', ...
std::string supported_descrs() {
  std::string out;
  for (const DTypeInfo& i : kDTypes)
    if (!i.npy.empty()) out += fmt::format("{}'{}'", out.empty() ? "" : ", ", i.npy);
  return out;
}

// The header dict, padded so that magic + version + length + header is a multiple of 64 bytes.
std::string make_header(const Tensor& t) {
  // (2, 3), but (5,) and ()
  std::string shape = fmt::format("{}", fmt::join(t.shape().begin(), t.shape().end(), ", "));
  if (t.dim() == 1) shape += ',';
  std::string h = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                              dtype_info(t.dtype()).npy, shape);
  size_t total = kMagicLen + 2 + 2 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  return h;
}

// ---- a tiny parser for the header dict ----

struct HeaderParser {
  std::string_view s;
  size_t i = 0;
  const std::string& file;

  [[noreturn]] void fail(std::string_view what) const {
    throw Error(fmt::format("load_npy: {}: bad header ({}): {}", file, what, s));
  }
  void skip_ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
  }
  bool eat(char c) {
    skip_ws();
    if (i < s.size() && s[i] == c) return ++i, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(fmt::format("expected '{}'", c));
  }
  std::string_view string() {
    skip_ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail("expected a string");
    char q = s[i++];
    size_t start = i;
    while (i < s.size() && s[i] != q) ++i;
    if (i >= s.size()) fail("unterminated string");
    return s.substr(start, i++ - start);
  }
  std::string_view word() {
    skip_ws();
    size_t start = i;
    while (i < s.size() && std::isalnum(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(start, i - start);
  }
};

struct Header {
  DType dtype = DType::Float32;
  Shape shape;
  size_t data_offset = 0;
};

Header read_header(std::ifstream& in, const std::string& file, uint64_t file_size) {
  char pre[kMagicLen + 2];
  in.read(pre, sizeof(pre));
  SACCADE_CHECK(in && std::memcmp(pre, kMagic, kMagicLen) == 0,
                "load_npy: {}: not a .npy file (bad magic string)", file);
  int major = static_cast<unsigned char>(pre[kMagicLen]);
  SACCADE_CHECK(major >= 1 && major <= 3, "load_npy: {}: unsupported .npy format version {}.{}", file, major,
                static_cast<int>(static_cast<unsigned char>(pre[kMagicLen + 1])));
  unsigned char len_bytes[4] = {};
  size_t len_size = major == 1 ? 2 : 4;
  in.read(reinterpret_cast<char*>(len_bytes), static_cast<std::streamsize>(len_size));
  SACCADE_CHECK(in.good(), "load_npy: {}: truncated header", file);
  uint64_t len = 0;
  for (size_t k = 0; k < len_size; ++k) len |= static_cast<uint64_t>(len_bytes[k]) << (8 * k);
  Header h;
  h.data_offset = kMagicLen + 2 + len_size + len;
  SACCADE_CHECK(h.data_offset <= file_size,
                "load_npy: {}: truncated header ({} bytes announced, file has {})", file, len, file_size);
  std::string text(len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(len));
  SACCADE_CHECK(in.good(), "load_npy: {}: truncated header", file);

  HeaderParser p{text, 0, file};
  bool have_descr = false, have_order = false, have_shape = false;
  p.expect('{');
  while (!p.eat('}')) {
    std::string_view key = p.string();
    p.expect(':');
    if (key == "descr") {
      std::string_view d = p.string();
      SACCADE_CHECK(dtype_from_npy(d, h.dtype), "load_npy: {}: unsupported dtype '{}' (supported: {})", file,
                    d, supported_descrs());
      have_descr = true;
    } else if (key == "fortran_order") {
      std::string_view w = p.word();
      if (w != "False" && w != "True") p.fail("fortran_order must be True or False");
      SACCADE_CHECK(w == "False", "load_npy: {}: fortran_order True is not supported (save a C-order array)",
                    file);
      have_order = true;
    } else if (key == "shape") {
      p.expect('(');
      while (!p.eat(')')) {
        std::string_view n = p.word();
        if (n.empty() || n.find_first_not_of("0123456789") != std::string_view::npos) p.fail("bad shape");
        SACCADE_CHECK(h.shape.size() < kMaxDims, "load_npy: {}: more than {} dimensions", file, kMaxDims);
        int64_t v = 0;  // from_chars: a size past int64 is an error, not an exception from std::stoll
        auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
        if (ec != std::errc() || end != n.data() + n.size()) p.fail("a size does not fit in int64");
        h.shape.push_back(v);
        if (!p.eat(',')) {
          p.expect(')');
          break;
        }
      }
      have_shape = true;
    } else {
      p.fail(fmt::format("unknown key '{}'", key));
    }
    if (!p.eat(',')) {
      p.expect('}');
      break;
    }
  }
  if (!(have_descr && have_order && have_shape)) p.fail("missing descr, fortran_order or shape");
  return h;
}

}  // namespace

void save_npy(const Tensor& t, const std::filesystem::path& path) {
  SACCADE_CHECK(t.defined(), "save_npy: {}: got an undefined tensor", path.string());
  SACCADE_CHECK(!dtype_info(t.dtype()).npy.empty(),
                "save_npy: {}: numpy has no {} dtype (convert first, e.g. t.to(DType::Float32))",
                path.string(), t.dtype());
  Tensor c = t.to(Device::cpu()).contiguous();
  std::string header = make_header(c);
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    SACCADE_CHECK(out.is_open(), "save_npy: {}: cannot open {} for writing", path.string(), tmp.string());
    const unsigned char version[2] = {1, 0};
    const unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xff),
                                  static_cast<unsigned char>(header.size() >> 8)};
    out.write(kMagic, kMagicLen);
    out.write(reinterpret_cast<const char*>(version), 2);
    out.write(reinterpret_cast<const char*>(len), 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(static_cast<const char*>(c.raw_data()), static_cast<std::streamsize>(c.numel() * c.itemsize()));
    out.close();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw Error(fmt::format("save_npy: {}: writing {} failed", path.string(), tmp.string()));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw Error(fmt::format("save_npy: {}: cannot rename {} into place: {}", path.string(), tmp.string(),
                            ec.message()));
  }
}

Tensor load_npy(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::error_code ec;
  SACCADE_CHECK(std::filesystem::is_regular_file(path, ec), "load_npy: {}: no such file", file);
  uint64_t size = std::filesystem::file_size(path, ec);
  SACCADE_CHECK(!ec, "load_npy: {}: cannot read the file size: {}", file, ec.message());
  std::ifstream in(path, std::ios::binary);
  SACCADE_CHECK(in.is_open(), "load_npy: {}: cannot open the file", file);
  Header h = read_header(in, file, size);
  // The shape's byte size is checked against the file before anything is allocated; a product past the
  // file's size saturates (no overflow), and a size 0 anywhere makes it 0.
  uint64_t nbytes = dtype_size(h.dtype);
  bool over = false;
  for (int64_t s : h.shape) {
    const uint64_t u = static_cast<uint64_t>(s);
    if (u != 0 && nbytes > size / u) over = true;
    nbytes = over ? nbytes : nbytes * u;
  }
  if (std::find(h.shape.begin(), h.shape.end(), 0) != h.shape.end()) nbytes = 0, over = false;
  SACCADE_CHECK(!over,
                "load_npy: {}: truncated data: shape {} and dtype {} need more bytes than the file's {}",
                file, h.shape, h.dtype, size);
  SACCADE_CHECK(size - h.data_offset == nbytes,
                "load_npy: {}: {} data for shape {} and dtype {} needs {} bytes, the file has {}", file,
                size - h.data_offset < nbytes ? "truncated" : "unexpected trailing", h.shape, h.dtype, nbytes,
                size - h.data_offset);
  Tensor t;
  try {  // a shape of 0 elements can still be one Tensor refuses: (2^32, 2^32, 0)
    t = Tensor::empty(h.shape, h.dtype);
  } catch (const Error& e) {
    throw Error(fmt::format("load_npy: {}: {}", file, e.what()));
  }
  in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(nbytes));
  SACCADE_CHECK(in.good() || nbytes == 0, "load_npy: {}: reading {} bytes of data failed", file, nbytes);
  if (h.dtype == DType::Bool) {
    uint8_t* p = t.data<uint8_t>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] != 0;
  }
  return t;
}

}  // namespace saccade::ops
