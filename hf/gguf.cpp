#include "hf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "hf/checkpoint.h"  // convert_floats
#include "ops/half.h"

namespace saccade::hf {

namespace {

constexpr uint64_t kDefaultAlignment = 32;  // GGUF_DEFAULT_ALIGNMENT
constexpr int kMaxArrayDepth = 4;
constexpr size_t kMaxDims = 4;  // GGML_MAX_DIMS

Error gguf_error(const std::string& path, const std::string& what) {
  return Error(fmt::format("hf::GgufFile: '{}': {}", path, what));
}

// The byte size of one value of the fixed-size value types (0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32,
// 7 bool, 10 u64, 11 i64, 12 f64); 0 for string (8) and array (9), -1 for a type GGUF does not have.
int value_size(uint32_t type) {
  switch (type) {
    case 0:
    case 1:
    case 7:
      return 1;
    case 2:
    case 3:
      return 2;
    case 4:
    case 5:
    case 6:
      return 4;
    case 10:
    case 11:
    case 12:
      return 8;
    case 8:
    case 9:
      return 0;
    default:
      return -1;
  }
}

// A cursor over the header's bytes: every read checks that the bytes are there.
struct Reader {
  const unsigned char* p;
  size_t size, pos = 0;
  const std::string& path;

  void need(uint64_t n, const char* what) const {
    if (n > size - pos)
      throw gguf_error(path, fmt::format("cut short: {} needs {} bytes at offset {}, the file has {}", what,
                                         n, pos, size));
  }
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string string(const char* what) {
    const uint64_t n = get<uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(p + pos), static_cast<size_t>(n));
    pos += static_cast<size_t>(n);
    return s;
  }
  GgufValue value(uint32_t type, const std::string& key, int depth) {
    GgufValue v;
    v.type = type;
    switch (type) {
      case 0:
        v.i = get<uint8_t>("a value");
        break;
      case 1:
        v.i = get<int8_t>("a value");
        break;
      case 2:
        v.i = get<uint16_t>("a value");
        break;
      case 3:
        v.i = get<int16_t>("a value");
        break;
      case 4:
        v.i = get<uint32_t>("a value");
        break;
      case 5:
        v.i = get<int32_t>("a value");
        break;
      case 11:
        v.i = get<int64_t>("a value");
        break;
      case 10: {
        const uint64_t u = get<uint64_t>("a value");
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          throw gguf_error(path, fmt::format("key '{}': the u64 {} is over 2^63 - 1", key, u));
        v.i = static_cast<int64_t>(u);
        break;
      }
      case 6:
        v.kind = GgufValue::Kind::Float, v.f = get<float>("a value");
        break;
      case 12:
        v.kind = GgufValue::Kind::Float, v.f = get<double>("a value");
        break;
      case 7: {
        const uint8_t b = get<uint8_t>("a value");
        if (b > 1) throw gguf_error(path, fmt::format("key '{}': the bool is {}, not 0 or 1", key, b));
        v.kind = GgufValue::Kind::Bool, v.b = b == 1;
        break;
      }
      case 8:
        v.kind = GgufValue::Kind::String, v.s = string("a string value");
        break;
      case 9: {
        if (depth >= kMaxArrayDepth)
          throw gguf_error(path, fmt::format("key '{}': arrays nested deeper than {}", key, kMaxArrayDepth));
        v.kind = GgufValue::Kind::Array;
        const uint32_t element = get<uint32_t>("an array's type");
        const uint64_t n = get<uint64_t>("an array's length");
        const int each = value_size(element);
        if (each < 0)
          throw gguf_error(path, fmt::format("key '{}': unknown array element type {}", key, element));
        // every element takes at least its size, or 8 bytes (a string's length, an array's type and length)
        need(n > (size - pos) / static_cast<uint64_t>(each > 0 ? each : 8) ? size - pos + 1 : 0, "an array");
        v.array.reserve(static_cast<size_t>(n));
        for (uint64_t i = 0; i < n; ++i) v.array.push_back(value(element, key, depth + 1));
        break;
      }
      default:
        throw gguf_error(path, fmt::format("key '{}': unknown value type {}", key, type));
    }
    return v;
  }
};

// The bytes of a tensor of `type` and `numel` elements whose rows are `row` long; 0 for a type not read here.
// Throws for Q8_0 rows that are not whole blocks.
uint64_t tensor_bytes(uint32_t type, uint64_t numel, uint64_t row, const std::string& path,
                      const std::string& name) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::F32:
      return numel * 4;
    case GgufType::F16:
    case GgufType::BF16:
      return numel * 2;
    case GgufType::Q8_0:
      if (row % BlockQ8_0::kSize != 0)
        throw gguf_error(path, fmt::format("tensor '{}': Q8_0 rows of {} are not whole blocks of {}", name,
                                           row, BlockQ8_0::kSize));
      return numel / BlockQ8_0::kSize * sizeof(BlockQ8_0);
  }
  return 0;
}

}  // namespace

std::string gguf_type_name(uint32_t type) {
  static const char* const names[] = {
      "F32",      "F16",      "Q4_0",    "Q4_1",  "Q4_2",       "Q4_3",       "Q5_0",       "Q5_1",
      "Q8_0",     "Q8_1",     "Q2_K",    "Q3_K",  "Q4_K",       "Q5_K",       "Q6_K",       "Q8_K",
      "IQ2_XXS",  "IQ2_XS",   "IQ3_XXS", "IQ1_S", "IQ4_NL",     "IQ3_S",      "IQ2_S",      "IQ4_XS",
      "I8",       "I16",      "I32",     "I64",   "F64",        "IQ1_M",      "BF16",       "Q4_0_4_4",
      "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",   "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  if (type < sizeof(names) / sizeof(names[0]) && type != 4 && type != 5) return names[type];
  return fmt::format("type {}", type);
}

GgufFile::GgufFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw gguf_error(path, fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw gguf_error(path, "not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      throw gguf_error(path, fmt::format("cannot map: {}", std::strerror(errno)));
    }
    map_ = static_cast<const unsigned char*>(m);
    mapped_ = true;
  }
  ::close(fd);
  try {
    parse_header();
  } catch (...) {
    if (mapped_) ::munmap(const_cast<unsigned char*>(map_), size_);
    mapped_ = false;
    throw;
  }
}

std::unique_ptr<GgufFile> GgufFile::parse(std::string bytes, const std::string& name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  f->owned_ = std::move(bytes);
  f->map_ = reinterpret_cast<const unsigned char*>(f->owned_.data());
  f->size_ = f->owned_.size();
  f->parse_header();
  return f;
}

GgufFile::~GgufFile() {
  if (mapped_) ::munmap(const_cast<unsigned char*>(map_), size_);
}

void GgufFile::parse_header() {
  static const unsigned char kEmpty[1] = {0};
  Reader r{map_ ? map_ : kEmpty, size_, 0, path_};
  const uint32_t magic = r.get<uint32_t>("the magic");
  if (std::memcmp(&magic, "GGUF", 4) != 0)
    throw gguf_error(path_, "not a GGUF file (its first 4 bytes are not \"GGUF\")");
  version_ = r.get<uint32_t>("the version");
  if (version_ != 2 && version_ != 3)
    throw gguf_error(
        path_, (version_ & 0xffff) == 0
                   ? fmt::format("version {:#x}: a big-endian file (only little-endian is read)", version_)
                   : fmt::format("version {} (2 and 3 are read)", version_));
  const uint64_t n_tensors = r.get<uint64_t>("the tensor count");
  const uint64_t n_kv = r.get<uint64_t>("the metadata count");
  // each key takes at least 12 bytes (its length and the value's type), each tensor info at least 24
  r.need(n_kv > (size_ - r.pos) / 12 ? size_ - r.pos + 1 : 0, "the metadata");
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.string("a key");
    const uint32_t type = r.get<uint32_t>("a value's type");
    GgufValue v = r.value(type, key, 0);
    keys.push_back(key);
    metadata_.emplace_back(std::move(key), std::move(v));
  }
  std::sort(keys.begin(), keys.end());
  if (auto dup = std::adjacent_find(keys.begin(), keys.end()); dup != keys.end())
    throw gguf_error(path_, fmt::format("key '{}' is given twice", *dup));
  uint64_t alignment = kDefaultAlignment;
  if (const GgufValue* a = find("general.alignment")) {
    if (a->kind != GgufValue::Kind::Int || a->i <= 0 || (a->i & (a->i - 1)) != 0)
      throw gguf_error(path_, "key 'general.alignment': not a power of two");
    alignment = static_cast<uint64_t>(a->i);
  }
  r.need(n_tensors > (size_ - r.pos) / 24 ? size_ - r.pos + 1 : 0, "the tensor infos");
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = r.string("a tensor name");
    const uint32_t n_dims = r.get<uint32_t>("a tensor's rank");
    if (n_dims < 1 || n_dims > kMaxDims)
      throw gguf_error(
          path_, fmt::format("tensor '{}': {} dimensions (1 to {} are read)", t.name, n_dims, kMaxDims));
    std::vector<int64_t> ne(n_dims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = r.get<uint64_t>("a tensor's dimension");
      if (n < 1 || n > (uint64_t{1} << 62) / numel)
        throw gguf_error(path_, fmt::format("tensor '{}': dimension {} is {} (need 1 or more, and at most "
                                            "2^62 elements in all)",
                                            t.name, d, n));
      numel *= n;
      ne[n_dims - 1 - d] = static_cast<int64_t>(n);  // ne is innermost first; Shape outermost first
    }
    t.shape = Shape(ne);
    t.type = r.get<uint32_t>("a tensor's type");
    t.offset = r.get<uint64_t>("a tensor's offset");
    if (t.offset % alignment != 0)
      throw gguf_error(path_, fmt::format("tensor '{}': offset {} is not a multiple of the alignment {}",
                                          t.name, t.offset, alignment));
    t.nbytes = tensor_bytes(t.type, numel, static_cast<uint64_t>(ne.back()), path_, t.name);
    by_name_.emplace_back(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
  std::sort(by_name_.begin(), by_name_.end());
  for (size_t i = 1; i < by_name_.size(); ++i)
    if (by_name_[i].first == by_name_[i - 1].first)
      throw gguf_error(path_, fmt::format("tensor '{}' is given twice", by_name_[i].first));
  data_start_ = (r.pos + alignment - 1) / alignment * alignment;
  const uint64_t data_size = size_ >= data_start_ ? size_ - data_start_ : 0;
  for (const GgufTensorInfo& t : tensors_)
    if (t.nbytes > 0 && (t.offset > data_size || t.nbytes > data_size - t.offset))
      throw gguf_error(path_,
                       fmt::format("cut short: tensor '{}' ({}, {} bytes at offset {}) reaches past the "
                                   "end of the file ({} bytes of tensor data)",
                                   t.name, gguf_type_name(t.type), t.nbytes, t.offset, data_size));
}

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensorInfo* GgufFile::tensor(const std::string& name) const {
  auto it = std::lower_bound(by_name_.begin(), by_name_.end(), name,
                             [](const auto& item, const std::string& n) { return item.first < n; });
  return it != by_name_.end() && it->first == name ? &tensors_[it->second] : nullptr;
}

void GgufFile::read_into(const GgufTensorInfo& t, const Tensor& dst) const {
  const DType dd = dst.dtype();
  const bool floating = dd == DType::Float32 || dd == DType::BFloat16 || dd == DType::Float16;
  SACCADE_CHECK(floating && dst.device().is_cpu() && dst.is_contiguous() && dst.numel() == t.shape.numel(),
                "hf::GgufFile::read_into: '{}': tensor '{}' of shape {} into a destination of shape {} and "
                "dtype {} (need a contiguous CPU float32, bfloat16 or float16 tensor of as many elements)",
                path_, t.name, t.shape, dst.shape(), dtype_name(dd));
  const unsigned char* src = map_ + data_start_ + t.offset;
  const size_t n = static_cast<size_t>(t.shape.numel());
  switch (static_cast<GgufType>(t.type)) {
    case GgufType::F32:
      convert_floats(dst.raw_data(), dd, src, DType::Float32, n);
      return;
    case GgufType::F16:
      convert_floats(dst.raw_data(), dd, src, DType::Float16, n);
      return;
    case GgufType::BF16:
      convert_floats(dst.raw_data(), dd, src, DType::BFloat16, n);
      return;
    case GgufType::Q8_0: {
      // one block at a time: 32 floats d · q, then converted into dst
      for (size_t b = 0; b < n / BlockQ8_0::kSize; ++b) {
        BlockQ8_0 block;
        std::memcpy(&block, src + b * sizeof(BlockQ8_0), sizeof(BlockQ8_0));
        float values[BlockQ8_0::kSize];
        const float d = f16_bits_to_float(block.d.bits);
        for (int64_t i = 0; i < BlockQ8_0::kSize; ++i) values[i] = d * static_cast<float>(block.qs[i]);
        convert_floats(static_cast<unsigned char*>(dst.raw_data()) + b * BlockQ8_0::kSize * dtype_size(dd),
                       dd, reinterpret_cast<const unsigned char*>(values), DType::Float32, BlockQ8_0::kSize);
      }
      return;
    }
  }
  throw Error(
      fmt::format("hf::GgufFile::read_into: '{}': tensor '{}' is {}, which saccade does not read (F32, "
                  "F16, BF16 and Q8_0 are read)",
                  path_, t.name, gguf_type_name(t.type)));
}

Q8_0Matrix GgufFile::q8_0(const GgufTensorInfo& t) const {
  SACCADE_CHECK(t.type == static_cast<uint32_t>(GgufType::Q8_0) && t.shape.size() == 2,
                "hf::GgufFile::q8_0: '{}': tensor '{}' is {} of shape {} (need a 2-d Q8_0 tensor)", path_,
                t.name, gguf_type_name(t.type), t.shape);
  Q8_0Matrix m;
  m.rows = t.shape[0];
  m.cols = t.shape[1];
  auto blocks = std::make_shared<std::vector<BlockQ8_0>>(static_cast<size_t>(m.rows * m.blocks_per_row()));
  std::memcpy(blocks->data(), map_ + data_start_ + t.offset, blocks->size() * sizeof(BlockQ8_0));
  m.blocks = std::move(blocks);
  return m;
}

}  // namespace saccade::hf
