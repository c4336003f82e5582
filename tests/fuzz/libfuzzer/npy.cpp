// libFuzzer target: a NumPy .npy file (ops::load_npy).
// Properties: a rejected file gets a saccade::Error naming it; an accepted tensor fits in the file's bytes,
// and save_npy then load_npy gives the same tensor.
#include "ops/io.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"

using namespace saccade;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "input.npy");
  Tensor t;
  try {
    t = ops::load_npy(path);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    return 0;
  }
  FUZZ_CHECK(static_cast<uint64_t>(t.numel()) * t.itemsize() <= size, "a tensor of {} from {} bytes",
             t.shape(), size);
  const std::string again = fuzz::scratch("again.npy");
  ops::save_npy(t, again);
  FUZZ_CHECK(fuzz::same_tensor(ops::load_npy(again), t), "the tensor changed in a save and load");
  return 0;
}
