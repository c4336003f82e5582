// libFuzzer target: an IDX file of unsigned bytes, gzip-compressed or plain (examples::read_idx, the
// Fashion-MNIST reader).
// Properties: a rejected file gets a saccade::Error naming it; an accepted array has as many bytes as its
// sizes' product, and write_idx_gz then read_idx gives the same array.
#include "examples/common/idx.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"

using namespace saccade;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "input-idx-ubyte");
  examples::IdxArray a;
  try {
    a = examples::read_idx(path);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    return 0;
  }
  uint64_t total = 1;
  for (int64_t d : a.dims) total *= static_cast<uint64_t>(d);
  FUZZ_CHECK(!a.dims.empty() && total == a.data.size(), "sizes of {} elements, {} bytes read", total,
             a.data.size());
  const std::string again = fuzz::scratch("again-idx-ubyte.gz");
  examples::write_idx_gz(again, a.dims, a.data);
  examples::IdxArray b = examples::read_idx(again);
  FUZZ_CHECK(b.dims == a.dims && b.data == a.data, "the array changed in a write and read");
  return 0;
}
