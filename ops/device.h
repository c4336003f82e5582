#pragma once
// Where a tensor's bytes live.
#include <cstdint>
#include <ostream>
#include <string>

#include <fmt/format.h>

namespace saccade {

/// The kind of device a tensor lives on; a Device adds the index (cuda:0, cuda:1, ...).
enum class DeviceType : uint8_t { CPU, CUDA };

/// A device: the CPU, or CUDA GPU number `index`. Tensors on different devices never mix silently: an op
/// given both throws.
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}  // NOLINT: implicit on purpose
  static constexpr Device cpu() { return {DeviceType::CPU, 0}; }
  static constexpr Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  friend constexpr bool operator==(Device a, Device b) = default;

  /// Parses "cpu", "cuda" or "cuda:N"; throws saccade::Error otherwise.
  static Device parse(const std::string& s);
  std::string str() const { return is_cpu() ? "cpu" : fmt::format("cuda:{}", index); }
};

/// True when saccade was built with the CUDA backend and a GPU is present.
bool cuda_is_available();

/// Prints "cpu" or "cuda:N", as fmt's "{}" does.
inline std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }

}  // namespace saccade

template <>
struct fmt::formatter<saccade::Device> : fmt::formatter<std::string> {
  auto format(saccade::Device d, format_context& ctx) const {
    return fmt::formatter<std::string>::format(d.str(), ctx);
  }
};
