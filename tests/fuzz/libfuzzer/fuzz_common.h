#pragma once
// What the libFuzzer targets share: the input written to a scratch file (the readers take paths), the
// property checks (a failed one aborts, which libFuzzer reports as a crash with its input), tensor equality,
// and the small models the seed generator and the targets both build.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/normalization.h"
#include "core/error.h"
#include "ops/tensor.h"

namespace saccade::fuzz {

/// A property of the reader failed: print it and abort (libFuzzer then saves the input as a crash).
[[noreturn]] inline void property_failed(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "fuzz property failed at %s:%d: %s\n", file, line, what.c_str());
  std::abort();
}
#define FUZZ_CHECK(cond, ...) \
  ((cond) ? (void)0 : ::saccade::fuzz::property_failed(__FILE__, __LINE__, fmt::format(__VA_ARGS__)))

/// This process's scratch folder: /dev/shm (no disk traffic) when it exists, else the temporary folder.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path base =
        std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / fmt::format("saccade_fuzz_{}", ::getpid());
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return dir;
}

/// The path of `name` in the scratch folder.
inline std::string scratch(const std::string& name) { return (scratch_dir() / name).string(); }

/// Writes [data, data + size) to scratch(name) and returns its path.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = scratch(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  FUZZ_CHECK(out.good(), "cannot write the input to {}", path);
  return path;
}

/// The bytes of a file.
inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// A rejected file: the error must name the file (and say something beyond it).
inline void check_rejection(const Error& e, const std::string& path) {
  const std::string msg = e.what();
  FUZZ_CHECK(msg.find(path) != std::string::npos, "the error does not name the file {}: {}", path, msg);
  FUZZ_CHECK(msg.size() > path.size() + 8, "the error says nothing but the file: {}", msg);
}

/// Same dtype, shape and values (bit for bit, except that any NaN equals any NaN and 0 equals -0).
inline bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  const size_t n = static_cast<size_t>(x.numel());
  if (n == 0 || std::memcmp(x.raw_data(), y.raw_data(), n * x.itemsize()) == 0) return true;
  auto close = [](double u, double v) { return u == v || (std::isnan(u) && std::isnan(v)); };
  for (size_t i = 0; i < n; ++i) {
    if (x.dtype() == DType::Float32   ? !close(x.data<float>()[i], y.data<float>()[i])
        : x.dtype() == DType::Float64 ? !close(x.data<double>()[i], y.data<double>()[i])
                                      : true)
      return false;
  }
  return true;
}

/// Same names, each with the same tensor (same_tensor), in any order.
inline bool same_dict(const nn::StateDict& a, const nn::StateDict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, t] : a)
    if (!b.contains(k) || !same_tensor(t, b.at(k))) return false;
  return true;
}

/// The model of the state_dict target: an embedding, a LayerNorm and a linear layer (5 tensors, float32).
struct SmallModel : nn::Module {
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> fc;
  SmallModel() : Module("SmallModel") {
    emb = register_module("emb", std::make_shared<nn::Embedding>(5, 3));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(3));
    fc = register_module("fc", std::make_shared<nn::Linear>(3, 2));
  }
};

}  // namespace saccade::fuzz
