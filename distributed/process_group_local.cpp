// The transport of a build without MPI: a world of one process, where every collective is the identity.
// Single-process programs (and the examples without --distributed) run the same code paths.
#include "distributed/transport.h"

#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace saccade::distributed {
namespace {
class Done final : public Work {
 public:
  bool test() override { return true; }
};

class LocalGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "local"; }
  void broadcast(Tensor& t, int root) override {
    detail::check_buffer(t, "broadcast", /*float_only=*/false);
    SACCADE_CHECK(root == 0, "broadcast: root {} outside a world of 1 process", root);
  }
  std::unique_ptr<Work> allreduce_sum(Tensor& t) override {
    detail::check_buffer(t, "allreduce", /*float_only=*/true);
    return std::make_unique<Done>();  // the sum over one rank
  }
  void barrier(double) override {}
  [[noreturn]] void abort(const std::string& message, int code) override {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::_Exit(code);
  }
};
}  // namespace

bool mpi_available() { return false; }

namespace detail {
std::unique_ptr<ProcessGroup> start(int*, char***) { return std::make_unique<LocalGroup>(); }
void stop() {}
}  // namespace detail

}  // namespace saccade::distributed
