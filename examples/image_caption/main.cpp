// image_caption: captions Fashion-MNIST scenes ("top left sneaker and bottom right ankle boot") with
// attention, trained end to end by saccade. Two models: `sat` (show, attend and tell: CNN grid encoder, GRU
// decoder with additive attention) and `transformer` (the same encoder, a 2-layer transformer decoder).
// examples/image_caption/README.md gives the commands, the settings and the measured results.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "distributed/process_group.h"
#include "examples/common/cli.h"
#include "examples/common/idx.h"
#include "examples/common/scenes.h"
#include "examples/image_caption/captioner.h"
#include "examples/image_caption/training.h"
#include "nn/serialization.h"
#include "ops/blas.h"
#include "core/error.h"
#include "ops/threads.h"

namespace ex = saccade::examples;
namespace cli = saccade::examples::cli;

int main(int argc, char** argv) {
  saccade::use_best_blas_core(argv);  // OpenBLAS at the CPU's width (ops/blas.h); may re-execute once
  // Keep freed blocks in the heap: by default glibc returns big blocks (the im2col buffers of a batch are
  // tens of MB) to the kernel and every step page-faults them back in, a visible share of a training step's
  // CPU time.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"Caption Fashion-MNIST scenes with attention (show-attend-tell GRU or transformer decoder)"};
  cli::setup(app);
  std::string dtype_flag = "f32";
  std::string model = "sat", device_name = "cpu", out_dir = "caption_out", checkpoint,
              data_dir = ex::kFashionMnistDir;
  int64_t steps = 1000, batch_size = 64, eval_scenes = 2000, pictures = 6, checkpoint_every = 500;
  ex::CaptionConfig shape;  // --grid, --conv1, --conv2, --d-model, --hidden
  int64_t threads = 0;
  double lr = -1;
  uint64_t seed = 0;
  bool resume = false, eval_only = false, profile = false, distributed = false;
  std::string profile_trace;
  app.add_option("--model", model, "sat or transformer")->check(CLI::IsMember({"sat", "transformer"}));
  app.add_option("--steps", steps, "training steps")->check(cli::integer(1));
  app.add_option("--batch-size", batch_size, "scenes per step")->check(cli::integer(1));
  app.add_option("--lr", lr, "Adam's peak learning rate (default: sat 3e-3, transformer 1e-3)")
      ->check(cli::positive_real())
      ->default_str("");
  app.add_option("--device", device_name, "cpu, or cuda / cuda:N when built with CUDA");
  app.add_option("--seed", seed, "seed of the initial weights and of the training scenes")
      ->check(cli::seed());
  app.add_option("--dtype", dtype_flag,
                 "precision of the forward: f32, bf16 (autocast) or f16 (autocast and loss scaling)")
      ->check(cli::dtype_choices());
  app.add_option("--out", out_dir, "directory for the checkpoint and the pictures");
  app.add_flag(
      "--resume", resume,
      "continue from the --checkpoint file (without one: says so and starts fresh); model flags that "
      "differ from the checkpoint's are refused");
  app.add_flag("--eval-only", eval_only, "only evaluate the model in --checkpoint");
  app.add_option("--checkpoint", checkpoint, "checkpoint file (default: OUT/checkpoint.safetensors)");
  app.add_option("--checkpoint-every", checkpoint_every, "steps between checkpoints")->check(cli::integer(1));
  app.add_option("--eval-scenes", eval_scenes, "test scenes to evaluate on")->check(cli::integer(1, 10000));
  app.add_option("--pictures", pictures, "test scenes to draw with their attention maps")
      ->check(cli::integer(0));
  app.add_option("--grid", shape.grid, "grid size G of the encoder (7 or 14)")->check(CLI::IsMember({7, 14}));
  app.add_option("--conv1", shape.conv1, "channels of the first conv layer")->check(cli::integer(1, 4096));
  app.add_option("--conv2", shape.conv2, "channels of the second conv layer")->check(cli::integer(1, 4096));
  app.add_option("--d-model", shape.d_model, "size of the grid feature vectors")
      ->check(cli::integer(1, 65536));
  app.add_option("--hidden", shape.hidden, "GRU state size of sat")->check(cli::integer(1, 65536));
  app.add_option("--threads", threads, "CPU threads (0: OMP_NUM_THREADS, else all cores)")
      ->check(cli::integer(0, 4096));
  app.add_option("--data", data_dir, "directory of the Fashion-MNIST .gz files");
  app.add_flag("--phase-times", profile, "print the time per step spent in each phase");
  app.add_option("--profile", profile_trace,
                 "profile steps 2-4: a Chrome trace (Perfetto, chrome://tracing) here, a PNG beside it");
  app.add_flag("--distributed", distributed,
               "data-parallel over the ranks of mpirun (--batch-size is the global batch; rank 0 prints, "
               "writes the checkpoint and evaluates)");
  if (int rc = cli::parse(app, argc, argv, "image_caption"); rc >= 0) return rc;

  namespace dist = saccade::distributed;
  std::optional<dist::Environment> env;  // MPI_Init_thread ... MPI_Finalize
  if (distributed) {
    env.emplace(&argc, &argv);
    // Rank 0 speaks for the job; the others' stdout is discarded (their errors still reach stderr).
    if (!dist::is_main_process() && !std::freopen("/dev/null", "w", stdout)) return 1;
  }

  try {
    // before any work: the paths and the device
    if (!profile_trace.empty()) cli::require_trace_path("--profile", profile_trace);
    const saccade::Device device = cli::device("--device", device_name);
    if (checkpoint.empty()) checkpoint = out_dir + "/checkpoint.safetensors";
    if (eval_only) cli::require_file("--checkpoint", checkpoint);
    ex::CaptionConfig config = shape;
    config.model = model;
    const bool from_checkpoint = eval_only || (resume && std::filesystem::exists(checkpoint));
    if (from_checkpoint) {
      const ex::CaptionConfig saved =
          ex::CaptionConfig::from_metadata(saccade::nn::load_safetensors(checkpoint).metadata);
      // a flag that names the model must agree with the checkpoint's (as gpt's resume refuses)
      cli::require_same_model(app,
                              {{"--model", saved.model == model},
                               {"--grid", saved.grid == shape.grid},
                               {"--conv1", saved.conv1 == shape.conv1},
                               {"--conv2", saved.conv2 == shape.conv2},
                               {"--d-model", saved.d_model == shape.d_model},
                               {"--hidden", saved.hidden == shape.hidden}},
                              eval_only ? "--eval-only" : "--resume", checkpoint, saved.describe());
      config = saved;
    }
    cli::require_directory("--data", data_dir,
                           "Fashion-MNIST: install Debian's dataset-fashion-mnist, scripts/setup");
    cli::OutputDir out("--out", out_dir);  // removed again when the run fails before writing into it
    if (threads > 0) saccade::set_num_threads(static_cast<int>(threads));
    std::printf("device %s, %d CPU threads\n%s\n", device.str().c_str(), saccade::get_num_threads(),
                saccade::blas_info_line().c_str());
    if (distributed)
      std::printf("data parallel: %d ranks (%s), global batch %lld\n", dist::world_size(),
                  dist::world().backend().c_str(), static_cast<long long>(batch_size));
    if (resume && !eval_only && !from_checkpoint)
      std::printf("--resume: no checkpoint at %s: starting a fresh %s model\n", checkpoint.c_str(),
                  config.model.c_str());

    ex::ImageSet t10k = ex::load_fashion_mnist("t10k", data_dir);
    ex::SceneBatch test = ex::make_test_scenes(t10k, eval_scenes);

    std::shared_ptr<ex::Captioner> captioner = ex::make_captioner(config, seed);
    captioner->to(device);
    std::printf("%s, %lld parameters\n", config.describe().c_str(),
                static_cast<long long>(captioner->num_parameters()));

    if (eval_only) {
      saccade::nn::load(*captioner, checkpoint);
    } else {
      ex::ImageSet train = ex::load_fashion_mnist("train", data_dir);
      ex::TrainOptions opts;
      opts.steps = steps;
      opts.batch_size = batch_size;
      opts.lr = lr > 0 ? lr : (config.model == "sat" ? 3e-3 : 1e-3);
      opts.seed = seed;
      opts.device = device;
      opts.checkpoint = checkpoint;
      opts.checkpoint_every = checkpoint_every;
      opts.resume = resume;
      opts.profile = profile;
      opts.profile_trace = profile_trace;
      opts.distributed = distributed;
      opts.dtype = cli::dtype(dtype_flag);
      std::printf("training %lld steps of batch %lld, lr %g, checkpoint %s\n",
                  static_cast<long long>(opts.steps), static_cast<long long>(batch_size), opts.lr,
                  checkpoint.c_str());
      std::fflush(stdout);
      ex::TrainResult tr = ex::train_captioner(*captioner, train, opts);
      if (tr.steps_done > 0)
        std::printf(
            "trained %lld steps in %.1f s (%.2f steps/s); final training loss %.4f (the mean of the last "
            "%lld "
            "steps; the progress line's loss is a running average)\n",
            static_cast<long long>(tr.steps_done), tr.seconds, tr.steps_done / tr.seconds, tr.final_loss,
            static_cast<long long>(std::min<int64_t>(tr.steps_done, 100)));
      else
        std::printf("%s is at step %lld or later: nothing to train (--steps %lld)\n", checkpoint.c_str(),
                    static_cast<long long>(steps), static_cast<long long>(steps));
    }

    if (!dist::is_main_process()) return 0;  // every replica is the same: rank 0 evaluates
    ex::EvalResult result = ex::evaluate_captioner(*captioner, test, device);
    std::printf("evaluated %lld test scenes in %.1f s (greedy decoding)\n",
                static_cast<long long>(eval_scenes), result.seconds);
    ex::print_metrics(stdout, result);
    std::vector<std::string> written = ex::write_caption_pictures(out_dir, test, result, pictures);
    if (!written.empty()) std::printf("wrote %zu pictures to %s\n", written.size(), out_dir.c_str());
    ex::Vocab vocab;
    for (int64_t i = 0; i < std::min<int64_t>(pictures, eval_scenes); ++i)
      std::printf("  scene %lld: \"%s\" (truth \"%s\")\n", static_cast<long long>(i),
                  vocab.decode(result.generated[i]).c_str(), test.captions[i].c_str());
  } catch (const std::exception& e) {
    // One rank's error ends the whole job: the others would wait for it in the next collective.
    if (distributed && dist::world_size() > 1)
      dist::world().abort(fmt::format("image_caption: rank {}: {}", dist::rank(), e.what()));
    return cli::report("image_caption", e);
  }
  return 0;
}
