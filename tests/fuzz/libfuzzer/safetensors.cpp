// libFuzzer target: a safetensors file read into a tensor map (nn::load_safetensors).
// Properties: a rejected file gets a saccade::Error naming it; an accepted file's tensors fit in its bytes
// (no size was taken on trust), saving them writes a file that loads again to the same tensors and metadata,
// and saving that again gives the same bytes (the writer is canonical).
#include "nn/serialization.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"

using namespace saccade;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "input.safetensors");
  nn::Safetensors file;
  try {
    file = nn::load_safetensors(path);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    return 0;
  }
  uint64_t elements = 0;
  for (const auto& [name, t] : file.tensors) {
    FUZZ_CHECK(t.defined() && t.is_contiguous(), "tensor '{}' is undefined or not contiguous", name);
    elements += static_cast<uint64_t>(t.numel());
  }
  // Every element takes at least one byte of the file (BOOL; F16/BF16 two, widened to four in memory).
  FUZZ_CHECK(elements <= size, "{} elements accepted from a file of {} bytes", elements, size);

  const std::string again = fuzz::scratch("again.safetensors"), third = fuzz::scratch("third.safetensors");
  nn::save_safetensors(file.tensors, again, file.metadata);
  nn::Safetensors reread = nn::load_safetensors(again);
  FUZZ_CHECK(reread.metadata == file.metadata, "the metadata changed in a save and load");
  FUZZ_CHECK(reread.tensors.size() == file.tensors.size(), "{} tensors saved, {} loaded", file.tensors.size(),
             reread.tensors.size());
  for (const auto& [name, t] : file.tensors)
    FUZZ_CHECK(reread.tensors.contains(name) && fuzz::same_tensor(reread.tensors.at(name), t),
               "tensor '{}' changed in a save and load", name);
  nn::save_safetensors(reread.tensors, third, reread.metadata);
  FUZZ_CHECK(fuzz::read_bytes(again) == fuzz::read_bytes(third), "saving the same tensors twice differs");
  return 0;
}
