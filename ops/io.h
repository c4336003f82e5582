#pragma once
// Reading and writing tensors as NumPy .npy files (format version 1.0, C order, little-endian).
#include <filesystem>

#include "ops/tensor.h"

namespace saccade::ops {

/// Writes `t` to `path` as a NumPy .npy file (format 1.0): float32 as '<f4', float64 '<f8', int64 '<i8',
/// bool '|b1', float16 '<f2', in C (row-major) order; a tensor on another device is copied to the CPU first,
/// and any strides are written out contiguously. A 0-d tensor gives shape ().
///
/// The write is atomic: the bytes go to `path` + ".tmp", which is then renamed over `path`, so a crash never
/// leaves a half-written file at `path` (as numpy.save, plus the rename).
/// Throws saccade::Error naming the file when `t` is undefined or the file cannot be written, and naming the
/// dtype for bfloat16 (numpy has none: convert first).
void save_npy(const Tensor& t, const std::filesystem::path& path);

/// Reads a NumPy .npy file (format 1.0, 2.0 or 3.0) into a new contiguous CPU tensor of the file's shape.
/// Supported dtypes: '<f4' (float32), '<f8' (float64), '<i8' (int64), '|b1' (bool), '<f2' (float16); C order.
/// Throws saccade::Error naming the file for a missing or unreadable file, a bad magic string or header,
/// an unsupported dtype, fortran_order True, or data shorter (or longer) than the header's shape needs.
Tensor load_npy(const std::filesystem::path& path);

}  // namespace saccade::ops
