// libFuzzer target: examples::load_run, the reader of `gpt finetune --resume`'s OUT/last.safetensors.
// Input: the file's bytes.
// Properties: a rejected file raises saccade::Error naming it and changes nothing (the trainable
// parameters, AdamW's state, the log and the dropout generator are as before); an accepted one gives a
// position inside the data (next <= examples, a step with a log of that many losses) and the file's
// parameters; saved again with save_run and read back, it gives the same position, parameters and log.
#include <string>

#include "nn/serialization.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"
#include "tests/fuzz/libfuzzer/fuzz_finetune.h"

using namespace saccade;

using fuzz::FinetuneRun;
using fuzz::kFinetuneExamples;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "last.safetensors");
  FinetuneRun run;
  const nn::StateDict before = run.state();
  const uint64_t offset = run.gen.offset();
  examples::RunPosition at;
  try {
    at = examples::load_run(path, run.model, run.opt, run.log, run.opts, kFinetuneExamples);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    FUZZ_CHECK(fuzz::same_dict(before, run.state()) && run.log.train_loss.empty() &&
                   run.log.val_loss.empty() && run.gen.seed() == 7 && run.gen.offset() == offset,
               "a rejected file changed the run: {}", e.what());
    return 0;
  }
  FUZZ_CHECK(at.next <= kFinetuneExamples && at.step >= 0 &&
                 static_cast<int64_t>(run.log.train_loss.size()) == at.step,
             "position step {} next {} with {} losses", at.step, at.next, run.log.train_loss.size());
  const nn::Safetensors file = nn::load_safetensors(path);
  for (const auto& [name, p] : run.model.named_parameters())
    if (p.requires_grad())
      FUZZ_CHECK(fuzz::same_tensor(p.data(), file.tensors.at("param." + name).to(p.dtype())),
                 "parameter {} is not the file's", name);
  // saved again and read back: the same run
  const std::string again = fuzz::scratch("again.safetensors");
  examples::save_run(again, run.model, run.opt, run.log, at, run.opts, kFinetuneExamples);
  FinetuneRun back;
  const examples::RunPosition at2 =
      examples::load_run(again, back.model, back.opt, back.log, back.opts, kFinetuneExamples);
  FUZZ_CHECK(at2.step == at.step && at2.shuffles == at.shuffles && at2.next == at.next,
             "the position changed");
  FUZZ_CHECK(fuzz::same_dict(run.state(), back.state()), "the parameters or AdamW's state changed");
  FUZZ_CHECK(back.log.train_loss.size() == run.log.train_loss.size() &&
                 back.log.val_loss.size() == run.log.val_loss.size(),
             "the log changed");
  return 0;
}
