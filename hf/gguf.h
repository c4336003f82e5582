#pragma once
// GGUF, llama.cpp's single-file model format (the GGUF specification in the ggml repository), read as its
// tensors and metadata:
//
//   "GGUF" | version u32 (2 or 3) | tensor_count u64 | metadata_kv_count u64
//   metadata:     key (string) | value type u32 | value          (strings are u64 length + bytes)
//   tensor infos: name (string) | n_dims u32 | ne[n_dims] u64 (innermost first) | type u32 | offset u64
//   padding to general.alignment (32 unless the metadata says), then the tensor data, each tensor at its
//   offset from there (a multiple of the alignment).
//
// Little-endian files only (a big-endian file's version reads byte-swapped and is refused). The tensor types
// read are F32, F16, BF16 and Q8_0 (blocks of 32 int8 weights with one float16 scale); any other type is
// listed by name and refused when it is read. A GgufFile maps the file (read-only); a tensor's bytes are
// read only when it is read, converted (Q8_0 dequantized) straight into the destination. hf/gguf_model.h
// turns the metadata into a model's Config, the tensors into the Hugging Face names, and the vocabulary into
// a tokenizer.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/kernels/quant.h"  // Q8_0Matrix
#include "ops/tensor.h"

namespace saccade::hf {

/// ggml_type's numbers for the tensor types read here (ggml.h).
enum class GgufType : uint32_t { F32 = 0, F16 = 1, Q8_0 = 8, BF16 = 30 };

/// ggml's name of a tensor type ("F32", "Q4_K", ...), or "type N" for a number ggml does not have.
std::string gguf_type_name(uint32_t type);

/// One metadata value. GGUF's twelve value types land in five kinds: the integers (u8 ... i64; a u64 above
/// 2^63 - 1 is refused) in `i`, float32 and float64 in `f`, bool in `b`, string in `s`, arrays (of any one
/// type, nested arrays included) in `array`.
struct GgufValue {
  enum class Kind { Int, Float, Bool, String, Array };
  Kind kind = Kind::Int;
  uint32_t type = 0;  ///< GGUF's value type number (0 u8 ... 12 f64), for messages
  int64_t i = 0;
  double f = 0.0;
  bool b = false;
  std::string s;
  std::vector<GgufValue> array;
};

/// One tensor's info: its name, shape in PyTorch's order (ggml's ne reversed: a (out, in) weight has ne
/// [in, out]), type, and where its bytes are (from the data section's start).
struct GgufTensorInfo {
  std::string name;
  Shape shape;
  uint32_t type = 0;
  uint64_t offset = 0;
  uint64_t nbytes = 0;  ///< 0 for a type not read here (its size is not known)
};

/// A GGUF file, mapped for as long as this object lives, its header parsed and checked.
class GgufFile {
 public:
  /// Maps and parses `path`. Throws saccade::Error naming "hf::GgufFile", the file and what is wrong (and
  /// the key or tensor where there is one) for: a file that cannot be read; a magic other than "GGUF"; a
  /// version other than 2 or 3 (a big-endian file included); a header cut short (counts, lengths or
  /// values past the end of the file); an unknown value type; nested arrays deeper than 4; a key or tensor
  /// name given twice; a tensor with no dimension or more than 4, a dimension below 1 or an element count
  /// over 2^62; an alignment that is not a power of two; a tensor offset that is not a multiple of it; and a
  /// tensor of a type read here whose bytes reach past the end of the file (or, for Q8_0, whose rows are not
  /// whole blocks of 32).
  explicit GgufFile(const std::string& path);
  /// Parses `bytes` (a whole file held in memory; `name` names it in errors). Same checks and errors.
  static std::unique_ptr<GgufFile> parse(std::string bytes, const std::string& name = "<memory>");
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  const std::string& path() const { return path_; }
  /// The metadata, in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  /// The value of `key`, or nullptr.
  const GgufValue* find(const std::string& key) const;
  /// The tensors, in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  /// The tensor `name`, or nullptr.
  const GgufTensorInfo* tensor(const std::string& name) const;

  /// Copies tensor `t` into `dst` (CPU, contiguous, float32 / bfloat16 / float16, of t's element count):
  /// F32, F16 and BF16 converted as torch's copy_ does (round to nearest even), Q8_0 dequantized (d · q,
  /// in float32, then rounded to dst's dtype). Throws saccade::Error naming "hf::GgufFile::read_into", the
  /// file and the tensor for another type (by ggml's name), element count or destination.
  void read_into(const GgufTensorInfo& t, const Tensor& dst) const;
  /// Tensor `t` (a 2-D Q8_0 tensor) as it is on disk, for a product with the quantized weights
  /// (ops::linear_q8_0). Throws saccade::Error naming "hf::GgufFile::q8_0" for another type or rank.
  Q8_0Matrix q8_0(const GgufTensorInfo& t) const;

 private:
  GgufFile() = default;
  void parse_header();
  std::string path_;
  std::string owned_;  // parse()'s bytes
  const unsigned char* map_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  uint32_t version_ = 0;
  uint64_t data_start_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::vector<std::pair<std::string, size_t>> by_name_;  // sorted, into tensors_
};

}  // namespace saccade::hf
