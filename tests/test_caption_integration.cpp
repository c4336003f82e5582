// examples/image_caption: trains the sat captioner on real Fashion-MNIST scenes and checks that it learned.
// Tagged [slow]: it runs in the Release CTest pass only (scripts/test skips [slow] under the sanitizers).
// Compiled only when examples/image_caption/CMakeLists.txt built the saccade_caption library.
#ifdef SACCADE_HAVE_CAPTION

#include <filesystem>

#include "autograd/grad_mode.h"
#include "examples/common/idx.h"
#include "examples/common/scenes.h"
#include "examples/image_caption/captioner.h"
#include "examples/image_caption/training.h"
#include "helpers.h"
#include "nn/checkpoint.h"

using namespace saccade;
using namespace saccade::examples;

namespace {

bool have_fashion_mnist() {
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    if (!std::filesystem::exists(std::string(kFashionMnistDir) + "/" + f)) return false;
  return true;
}

}  // namespace

TEST_CASE("caption: sat learns to caption real Fashion-MNIST scenes", "[slow][caption]") {
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST not found in " << kFashionMnistDir
                                       << " (Debian package dataset-fashion-mnist): skipped");
    SUCCEED();
    return;
  }
  ImageSet train = load_fashion_mnist("train");
  ImageSet t10k = load_fashion_mnist("t10k");
  SceneBatch test = make_test_scenes(t10k, 500);

  CaptionConfig config = CaptionConfig::defaults("sat");
  std::shared_ptr<Captioner> model = make_captioner(config, 0);
  TrainOptions opts;
  opts.steps = 300;
  opts.batch_size = 32;
  opts.lr = 3e-3;
  opts.warmup = 30;
  opts.log = nullptr;
  TrainResult tr = train_captioner(*model, train, opts);
  REQUIRE(tr.steps_done == 300);

  EvalResult r = evaluate_captioner(*model, test, Device::cpu());
  INFO("exact " << r.exact_match << " bleu " << r.bleu4 << " items " << r.item_accuracy << " localization "
                << r.localization << " loss " << tr.final_loss);
  // Chance: a caption that names a uniformly random class for each correctly placed item gets item accuracy
  // 0.1, and uniform attention over the grid localizes at 0.25.
  // TODO(thresholds from measurements)
  CHECK(r.item_accuracy > 0.5);
  CHECK(r.localization > 0.5);
}

#endif  // SACCADE_HAVE_CAPTION
