#pragma once
// (Named "serialization" so that "checkpoint" in the code means activation checkpointing; the public
// names save_checkpoint / load_checkpoint stay, as PyTorch's torch.save of a training checkpoint does.)
// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors), which PyTorch reads
// with safetensors.torch.load_file:
//
//   8 bytes   N, little-endian uint64: the header's length
//   N bytes   JSON: {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [2, 3],
//             "data_offsets": [begin, end]}, ...}, padded with spaces to a multiple of 8
//   rest      the tensors' bytes, row-major, little-endian; offsets are relative to the start of this buffer;
//             the tensors are contiguous (no holes, no overlaps) and cover it exactly
//
// We write what the reference implementation writes, byte for byte: compact JSON with "__metadata__" first,
// tensors ordered by dtype (I64, F64, F32, BOOL: largest alignment first) and then by name.
//
// Model + optimizer checkpoints use ONE file, so that saving them together is atomic: the model's
// state_dict under its own names (e.g. "decoder.W_q.weight"), the optimizer's under "optimizer." (e.g.
// "optimizer.state.0.exp_avg"), and the training step in the metadata ("step"). In Python,
// {k: v for k, v in load_file(path).items() if not k.startswith("optimizer.")} is the model's state_dict.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/optim.h"

namespace saccade::nn {

class GradScaler;  // nn/grad_scaler.h

/// The "__metadata__" of a safetensors file: free-form string pairs.
using Metadata = std::map<std::string, std::string>;

/// The contents of a safetensors file: tensors (CPU, contiguous, in file order) and metadata.
struct Safetensors {
  StateDict tensors;
  Metadata metadata;
};

/// One tensor of a safetensors file as its header describes it: [begin, end) are byte offsets from the start
/// of the file (not of the data buffer), end - begin = the tensor's bytes.
struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

/// A safetensors file's header, validated as load_safetensors validates it (everything but the bool bytes),
/// without reading the tensors: for readers that place the bytes themselves (hf/: memory-mapped, straight
/// into a model's parameters). Entries in file order. Throws saccade::Error naming `op` and the file.
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;
  Metadata metadata;
  uint64_t file_size = 0;
};
SafetensorsHeader read_safetensors_header(const std::string& path,
                                          const std::string& op = "load_safetensors");

/// Writes `tensors` (any dtype: float32, float64, int64, bool, bfloat16, float16; any device, any strides) to
/// `path` in the safetensors format, each as itself (BF16, F16 for the 16-bit ones), byte for byte as
/// safetensors.torch writes them (tensors sorted by dtype as the reference's enum, then by name). Atomic:
/// writes `path`.tmp, fsyncs it and renames it over `path`, so `path` is never left half written. Throws
/// saccade::Error naming the file for an I/O failure, and naming the tensor for an undefined tensor or the
/// reserved name "__metadata__".
void save_safetensors(const StateDict& tensors, const std::string& path, const Metadata& metadata = {});

/// Reads a safetensors file, validating everything before returning: the file must be long enough for the
/// header length and the header; the header must be a JSON object without duplicate keys, with string
/// metadata and, per tensor, a known dtype (F32, F64, I64, BOOL, BF16, F16, read as themselves; a 16-bit
/// checkpoint still loads into a float32 model: load_state_dict converts), a
/// shape of at most 8 non-negative sizes and offsets [begin, end] with end - begin = the tensor's byte size;
/// the tensors must tile the data buffer exactly (no overlap, no hole, nothing after); bool bytes must be 0
/// or 1. Throws saccade::Error naming the file and the problem.
Safetensors load_safetensors(const std::string& path);

/// Saves module.state_dict() (names and layouts as PyTorch's) with `metadata` to `path` (atomically).
void save(const Module& module, const std::string& path, const Metadata& metadata = {});
/// Loads `path` into `module` strictly: every name and shape must match (keys starting with "optimizer." or
/// "scaler." are ignored, so a checkpoint file works too); values are converted to each parameter's dtype and
/// device. On any error (file or mismatch), throws saccade::Error and leaves the module unchanged. Returns
/// the file's metadata.
Metadata load(Module& module, const std::string& path);

/// What load_checkpoint returns: the saved step and the metadata (including "step").
struct CheckpointInfo {
  int64_t step = 0;
  Metadata metadata;
};

/// Saves the module's state, the optimizer's state (keys prefixed "optimizer.") and `step` (metadata "step",
/// in decimal) to one file, atomically; with a `scaler`, its state_dict too (keys prefixed "scaler.", e.g.
/// "scaler.scale"). Throws saccade::Error for a negative step or a metadata key "step".
void save_checkpoint(const std::string& path, const Module& module, const Optimizer& optimizer, int64_t step,
                     const Metadata& metadata = {}, const GradScaler* scaler = nullptr);
/// Restores module and optimizer (and `scaler`, when given) from a file written by save_checkpoint. Validates
/// the file, the module's names and shapes, the optimizer's state, the scaler's and the step before changing
/// anything: on error all are unchanged. A file's "scaler." keys are ignored when no scaler is given; a
/// scaler given for a file without them is an error (the run that saved it did not scale its loss). To resume
/// a scheduler, call its set_last_epoch(info.step) (if it steps once per step).
CheckpointInfo load_checkpoint(const std::string& path, Module& module, Optimizer& optimizer,
                               GradScaler* scaler = nullptr);

}  // namespace saccade::nn
