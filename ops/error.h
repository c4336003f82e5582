#pragma once
// saccade::Error and SACCADE_CHECK: the one way every layer reports bad input.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace saccade {

/// The exception every public saccade function throws on bad input (shapes, dtypes, devices, indices, files).
/// Its message starts with the name of the op that rejected the input and names the offending shapes.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace saccade

/// SACCADE_CHECK(cond, "op: format {}", args...): throws saccade::Error with the formatted message when `cond`
/// is false. The format string should begin with the op's name.
#define SACCADE_CHECK(cond, ...)                                                   \
  do {                                                                             \
    if (!(cond)) [[unlikely]] throw ::saccade::Error(::fmt::format(__VA_ARGS__)); \
  } while (0)
