#pragma once
// One agreement check of a benchmark against its PyTorch twin: our inputs go to the twin as raw float32 files
// in a temporary folder, the twin computes the same thing on them and writes its results beside them, and we
// compare. So the two sides of a benchmark are shown to compute the same function before they are timed.
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_util.h"
#include "saccade.h"

namespace saccade::bench {

/// Named float32 tensors (any shape and strides; written and compared as contiguous row-major values).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// Writes each of `inputs` to DIR/<name>.bin in a fresh temporary folder DIR, runs
/// `python() <script_and_args> DIR`, and compares each of `outputs` with DIR/<name>_torch.bin:
/// max |ours - torch| / max(1, max |torch|) per tensor, printed one a line under `title`. Returns true when
/// every output came back with our number of values and within `tolerance`; removes the folder.
inline bool check_against_torch(const std::string& title, const NamedTensors& inputs,
                                const NamedTensors& outputs, const std::string& script_and_args,
                                double tolerance) {
  char dir_template[] = "/tmp/saccade_check_XXXXXX";
  const char* made = mkdtemp(dir_template);
  if (!made) return std::fprintf(stderr, "%s: cannot make a temporary folder\n", title.c_str()), false;
  const std::string dir = made;
  auto path = [&](const std::string& name) { return dir + "/" + name + ".bin"; };
  bool ok = true;
  for (const auto& [name, t] : inputs) {
    const Tensor c = t.to(DType::Float32).contiguous();
    ok = write_floats(path(name), c.data<float>(), size_t(c.numel())) && ok;
  }
  ok = ok && std::system((python() + " " + script_and_args + " " + dir).c_str()) == 0;
  std::printf("%s: max |ours - torch| / max(1, max |torch|)\n", title.c_str());
  double worst = 0;
  for (const auto& [name, t] : outputs) {
    const std::vector<float> theirs = read_floats(path(name + "_torch"));
    const Tensor ours = t.to(DType::Float32).contiguous();
    if (theirs.size() != size_t(ours.numel())) {
      std::printf("  %-6s no answer from %s\n", name.c_str(), python().c_str());
      ok = false;
      continue;
    }
    double diff = 0, scale = 1;
    for (size_t i = 0; i < theirs.size(); ++i) {
      diff = std::max(diff, std::abs(double(ours.data<float>()[i]) - theirs[i]));
      scale = std::max(scale, std::abs(double(theirs[i])));
    }
    worst = std::max(worst, diff / scale);
    std::printf("  %-6s %.2e\n", name.c_str(), diff / scale);
  }
  for (const auto& [name, t] : inputs) std::remove(path(name).c_str());
  for (const auto& [name, t] : outputs) std::remove(path(name + "_torch").c_str());
  rmdir(dir.c_str());
  ok = ok && worst <= tolerance;
  std::printf("  %s (tolerance %.0e)\n", ok ? "agree" : "DISAGREE", tolerance);
  return ok;
}

}  // namespace saccade::bench
