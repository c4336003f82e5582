#pragma once
// The weights of a model folder in the Hugging Face layout, and the tables that carry them into saccade's
// modules and back:
//
//   dir/config.json                      hf/config.h
//   dir/model.safetensors                one file, or
//   dir/model.safetensors.index.json     {"weight_map": {"<tensor>": "model-00001-of-00002.safetensors",
//   ...}} dir/model-0000N-of-0000M.safetensors the shards it names
//
// Weights maps every file (mmap) and validates each header as nn::load_safetensors does; a tensor's bytes are
// read only when it is loaded, straight into the module's parameter (converted between float32, bfloat16 and
// float16 on the way), and the pages are dropped after: loading holds the model once, not twice.
//
// An architecture's table (NameRule rows) says which checkpoint tensor fills which parameters: one to one, or
// one checkpoint tensor split into several parameters (GPT-2's c_attn holds W_q, W_k and W_v side by side),
// transposed where the checkpoint stores (in, out) (GPT-2's Conv1D) and saccade's Linear (out, in). The same
// table turns a module back into the checkpoint's tensors (export_weights), for save_pretrained.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hf/config.h"
#include "nn/module.h"
#include "nn/serialization.h"

namespace saccade::hf {

/// Where load_weights reads a checkpoint's tensors from, under the checkpoint's tensor names: a folder's
/// safetensors files (Weights), or a GGUF file's tensors under the Hugging Face names (hf/gguf.h's
/// GgufWeights).
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  /// Every tensor name, in file order.
  virtual const std::vector<std::string>& names() const = 0;
  virtual bool contains(const std::string& name) const = 0;
  /// The shape of `name` (PyTorch's order). Throws saccade::Error naming the source and the tensor when
  /// absent.
  virtual Shape shape(const std::string& name) const = 0;
  /// Empty when `name` can be read into float32, bfloat16 and float16 tensors, else why not ("tensor 'x' is
  /// I64 (need F32, BF16 or F16)"): load_weights asks before it writes anything.
  virtual std::string unreadable(const std::string& name) const = 0;
  /// The tensor `name` as a new CPU tensor of a floating dtype (its dtype on disk where that is float32,
  /// bfloat16 or float16).
  virtual Tensor read(const std::string& name) const = 0;
  /// Copies `name` into `dst` (CPU, contiguous, float32 / bfloat16 / float16, of the tensor's element
  /// count), converting as torch's copy_ does (round to nearest even). Throws saccade::Error naming the
  /// tensor for another element count or an unreadable tensor.
  virtual void read_into(const std::string& name, const Tensor& dst) const = 0;
  /// The folder or file, for messages.
  virtual const std::string& dir() const = 0;
};

/// The tensors of a checkpoint folder's model.safetensors, or of the shards its model.safetensors.index.json
/// names, memory-mapped (read-only) for as long as this object lives.
class Weights : public TensorSource {
 public:
  /// Opens `dir`: its model.safetensors where there is one (as transformers' from_pretrained, which prefers
  /// it to an index), else the shards model.safetensors.index.json names. Throws saccade::Error naming
  /// "hf::Weights" and the file for: neither model.safetensors nor
  /// an index; an index that is not JSON, has no "weight_map" object, or names a file that is missing, is
  /// outside the folder, or does not hold the tensor it is named for; a shard that is not valid safetensors
  /// (nn::read_safetensors_header's checks); a tensor found in two shards.
  explicit Weights(const std::string& dir);
  ~Weights();
  Weights(const Weights&) = delete;
  Weights& operator=(const Weights&) = delete;

  /// Every tensor name, in file order (shard by shard).
  const std::vector<std::string>& names() const override { return names_; }
  bool contains(const std::string& name) const override;
  /// The header entry of `name` (dtype, shape). Throws saccade::Error naming the folder and the tensor when
  /// absent.
  const nn::SafetensorsEntry& entry(const std::string& name) const;
  Shape shape(const std::string& name) const override { return entry(name).shape; }
  std::string unreadable(const std::string& name) const override;
  /// The tensor `name` as a new CPU tensor of its dtype on disk (a copy of the mapped bytes, whose pages are
  /// then dropped as read_into's).
  Tensor read(const std::string& name) const override;
  /// Copies `name` into `dst` (CPU, contiguous, float32 / bfloat16 / float16, of the tensor's element
  /// count), converting from the dtype on disk as torch's copy_ does (round to nearest even), then lets the
  /// kernel drop the mapped pages. Throws saccade::Error naming the tensor for another element count or a
  /// dtype other than F32, BF16 or F16 on either side.
  void read_into(const std::string& name, const Tensor& dst) const override;
  /// The folder.
  const std::string& dir() const override { return dir_; }

 private:
  struct Shard;
  struct Where {
    size_t shard, entry;
  };
  const Where& find(const std::string& name) const;
  static void drop_pages(const Shard& shard, const nn::SafetensorsEntry& entry);
  std::string dir_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::string> names_;
  std::vector<std::pair<std::string, Where>> index_;  // sorted by name
};

/// One row of an architecture's name table: the checkpoint tensor `hf` fills the module's state_dict entries
/// `ours` (one, or several stacked along the checkpoint tensor's dimension `split_dim`, each as long as the
/// module's tensor: a fused q, k, v projection with fewer key/value heads splits into unequal parts), each
/// transposed when `transpose` (a 2-D checkpoint tensor stored (in, out) for a Linear (out, in)).
struct NameRule {
  std::string hf;
  std::vector<std::string> ours;
  bool transpose = false;
  int64_t split_dim = 0;
  /// >= 0: the checkpoint tensor is entry `index` along dim 0 of the one tensor `ours` names (a MoE layer's
  /// experts, one tensor each on disk, held as one batched weight); the rows of one tensor fill it together
  int64_t index = -1;
  /// > 1: the parts interleave along split_dim in `groups` equal blocks, each block holding every part's
  /// share in order (GPT-NeoX's query_key_value: head by head, its q, k and v rows); each part's length
  /// must be a multiple of groups. 1: the parts follow one another
  int64_t groups = 1;
};

/// The part of `full` that `groups` interleaved blocks along `dim` hold at [start / groups, (start + len) /
/// groups) of each block, joined: (..., len, ...) (NameRule::groups; GPT-NeoX's q rows of query_key_value are
/// interleaved_part(w, 0, H, 0, H·head_dim)). start and len are multiples of groups, and groups divides
/// full's size along dim.
Tensor interleaved_part(const Tensor& full, int64_t dim, int64_t groups, int64_t start, int64_t len);
/// The reverse: `parts`, each a multiple of groups long along `dim`, interleaved in `groups` blocks (each
/// block every part's share in order).
Tensor interleave(const std::vector<Tensor>& parts, int64_t dim, int64_t groups);

/// What load_weights did not use: checkpoint tensors no row names (non-strict loads only; strict loads
/// refuse them).
struct LoadReport {
  std::vector<std::string> skipped;
};

/// Loads `weights` into `module` by `table`. Every row's checkpoint tensor must exist and match its
/// parameters' shapes (after the split and transpose); every state_dict entry of the module must be filled
/// by exactly one row (or, for rows with an index, each of its entries along dim 0 by exactly one);
/// checkpoint tensors that no row names and `ignore` does not list are an error when `strict`, and listed in
/// the report otherwise. Everything is checked before anything is written: on error the module is unchanged.
/// Throws saccade::Error naming "hf::load_weights", the folder and the tensor.
LoadReport load_weights(nn::Module& module, const TensorSource& weights, const std::vector<NameRule>& table,
                        bool strict = true, const std::vector<std::string>& ignore = {});

/// The checkpoint tensors `table` makes of `module` (the reverse of load_weights: parts concatenated along
/// split_dim, transposed back), as contiguous CPU tensors of `dtype` (float32, bfloat16 or float16), in the
/// table's order. Throws saccade::Error naming "hf::export_weights" and the entry for a name the module
/// lacks.
nn::StateDict export_weights(const nn::Module& module, const std::vector<NameRule>& table,
                             DType dtype = DType::Float32);

/// Writes `dir`/config.json (config_json(config)) and `dir`/model.safetensors (`tensors`, metadata
/// {"format": "pt"} as transformers writes it), each atomically (a .tmp file renamed), making `dir` if it
/// is missing: what transformers' from_pretrained reads. Then, as transformers' save_pretrained does, removes
/// what a sharded save left there, which would describe other weights: model.safetensors.index.json and the
/// files named model-NNNNN-of-NNNNN.safetensors. Throws saccade::Error naming "hf::save_pretrained" and the
/// path for an I/O failure.
void save_pretrained(const std::string& dir, const Config& config, const nn::StateDict& tensors);

/// dst[i] = src[i] for `n` elements, converted between float32, bfloat16 and float16 (`dst_dtype` and
/// `src_dtype`; each of those three) as torch's copy_ does (round to nearest even): how Weights and
/// GgufFile read tensors.
void convert_floats(void* dst, DType dst_dtype, const unsigned char* src, DType src_dtype, size_t n);

/// Writes `text` to `path` atomically (`path`.tmp, then renamed over `path`), so that `path` is never half
/// written. Throws saccade::Error naming `op` and the file for an I/O failure.
void write_file_atomic(const std::string& path, const std::string& text, const std::string& op);

}  // namespace saccade::hf
