// saccade::Error and the thread-local ErrorScope chain that prefixes its messages.
#include "core/error.h"

#include <array>

#include "core/shape.h"

namespace saccade {

namespace {
constexpr int kMaxScopes = 16;  // deeper scopes still nest correctly but are not shown
constexpr int kMaxScopeShapes = 4;
struct Scope {
  std::string_view name;
  std::array<const Shape*, kMaxScopeShapes> shapes{};
  int num_shapes = 0;
};
thread_local std::array<Scope, kMaxScopes> t_scopes;
thread_local int t_depth = 0;

// "A(s1, s2) > B > " for the live scopes, dropping the innermost ones the message already names.
std::string with_scopes(const std::string& what) {
  int last = std::min(t_depth, kMaxScopes);
  // an inner op that names itself ("Linear: ...") inside scope "Linear": keep the op's own wording
  while (last > 0) {
    std::string_view n = t_scopes[last - 1].name;
    if (what.size() > n.size() && what.compare(0, n.size(), n) == 0 &&
        (what[n.size()] == ':' || what[n.size()] == '(' || what[n.size()] == ' '))
      --last;
    else
      break;
  }
  if (last == 0) return what;
  std::string out;
  for (int i = 0; i < last; ++i) {
    const Scope& s = t_scopes[i];
    if (i > 0 && s.name == t_scopes[i - 1].name)
      continue;  // forward calling its own variant: "A > A" says nothing
    out += s.name;
    if (s.num_shapes > 0) {
      out += '(';
      for (int j = 0; j < s.num_shapes; ++j) out += fmt::format("{}{}", j ? ", " : "", *s.shapes[j]);
      out += ')';
    }
    out += " > ";
  }
  return out + what;
}
}  // namespace

Error::Error(const std::string& what) : std::runtime_error(t_depth > 0 ? with_scopes(what) : what) {}

ErrorScope::ErrorScope(std::string_view name, std::initializer_list<const Shape*> shapes)
    : depth_(t_depth++) {
  if (depth_ >= kMaxScopes) return;
  Scope& s = t_scopes[depth_];
  s.name = name;
  s.num_shapes = 0;
  for (const Shape* p : shapes)
    if (p && s.num_shapes < kMaxScopeShapes) s.shapes[s.num_shapes++] = p;
}

ErrorScope::~ErrorScope() { t_depth = depth_; }

}  // namespace saccade
