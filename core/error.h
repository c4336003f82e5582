#pragma once
// saccade::Error and SACCADE_CHECK: the one way every layer reports bad input; ErrorScope: the one way a
// composite (a module, an op built from other ops) puts its own name in front of an error an inner op raised.
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace saccade {

class Shape;

/// The exception every public saccade function throws on bad input (shapes, dtypes, devices, indices, files).
/// Its message starts with the name of the op that rejected the input and names the offending shapes. When
/// it is thrown inside one or more ErrorScopes, the message is prefixed with their chain, outermost first:
/// "AddNorm > Dropout: p must be in [0, 1), got inf".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what);
};

/// While alive, every saccade::Error thrown on this thread gets "`name` > " in front of its message, or
/// "`name`(shapes...) > " when `shapes` are given (the shapes the user passed, e.g. a module's inputs).
/// Scopes nest (at most 16 deep are shown); a scope whose name the message already starts with (an inner
/// op that names itself) is not repeated. `name` and the shapes must outlive the scope (a literal, a
/// module's name(), the inputs' shape()). Costs a few thread-local writes: no try/catch, no allocation.
///
///     Variable AddNorm::forward(const Variable& x, const Variable& y) {
///       ErrorScope scope(name(), {&x.shape(), &y.shape()});
///       // an error in the inner Dropout reads "AddNorm([2, 3], [2, 3]) > Dropout: p must be ..."
class ErrorScope {
 public:
  explicit ErrorScope(std::string_view name, std::initializer_list<const Shape*> shapes = {});
  ~ErrorScope();
  ErrorScope(const ErrorScope&) = delete;
  ErrorScope& operator=(const ErrorScope&) = delete;

 private:
  int depth_;
};

}  // namespace saccade

/// SACCADE_CHECK(cond, "op: format {}", args...): throws saccade::Error with the formatted message when
/// `cond` is false. The format string should begin with the op's name.
#define SACCADE_CHECK(cond, ...)                          \
  do {                                                    \
    if (!(cond)) [[unlikely]]                             \
      throw ::saccade::Error(::fmt::format(__VA_ARGS__)); \
  } while (0)
