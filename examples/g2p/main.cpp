// g2p: spelling -> pronunciation on the CMU Pronouncing Dictionary, with attention, trained by saccade.
// Two models: `bahdanau` (bidirectional GRU encoder, GRU decoder with additive attention) and `transformer`.
// Train and evaluate:    g2p --model bahdanau --steps 3000 --out out/g2p_bahdanau
// Use a trained model:   g2p --checkpoint out/g2p_bahdanau/best.safetensors --words "saccade attention"
//                        echo saccade | g2p --checkpoint out/g2p_bahdanau/best.safetensors
// examples/g2p/README.md gives the settings and the measured results.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "examples/common/cli.h"
#include "examples/common/cmudict.h"
#include "examples/common/plots.h"
#include "examples/g2p/data.h"
#include "examples/g2p/decoding.h"
#include "examples/g2p/model.h"
#include "examples/g2p/training.h"
#include "nn/serialization.h"
#include "ops/blas.h"
#include "core/error.h"
#include "ops/reduce.h"
#include "ops/threads.h"

namespace ex = saccade::examples;
namespace cli = saccade::examples::cli;
using saccade::Tensor;

namespace {

std::string join(const ex::Phones& phones) {
  std::string s;
  for (const auto& p : phones) s += (s.empty() ? "" : " ") + p;
  return s;
}

void print_score(const char* name, const ex::G2PEval& e) {
  std::printf("%s_wer %.4f\n%s_per %.4f\n", name, e.score.wer, name, e.score.per);
  std::printf("  (%s: %lld of %lld words wrong, %lld edits over %lld phones, %.1f s)\n", name,
              static_cast<long long>(e.score.wrong_words), static_cast<long long>(e.score.words),
              static_cast<long long>(e.score.edits), static_cast<long long>(e.score.ref_phones), e.seconds);
  std::fflush(stdout);
}

// The alignment pictures of `words`: <out>/alignment_<word>.png (heads averaged) and, for the transformer,
// <out>/alignment_<word>_heads.png (one panel per head). Prints each word's diagonality.
void write_pictures(ex::G2PModel& model, const ex::G2PVocab& vocab, const std::vector<std::string>& words,
                    const std::string& out) {
  std::vector<ex::Phones> predicted = ex::pronounce(model, vocab, words, 1);
  for (size_t i = 0; i < words.size(); ++i) {
    const ex::Phones& phones = predicted[i];
    if (phones.empty()) continue;
    Tensor w = ex::alignment(model, vocab, words[i], phones);  // (heads, n + 1, S)
    const int64_t n = static_cast<int64_t>(phones.size()), heads = w.size(0);
    Tensor mean = saccade::ops::mean(w, {0}).narrow(0, 0, n).contiguous();  // (n, S)
    std::vector<std::string> letters, rows(phones.begin(), phones.end());
    for (char c : words[i]) letters.push_back(std::string(1, c));
    ex::Heatmap h;
    h.weights = mean;
    // a long, babbling output (an untrained model's 32 phones) would run the title off the picture's edges:
    // about 64 characters fit its 520 pixels
    const std::string head = words[i] + " -> ", tail = heads > 1 ? " (last layer, mean of heads)" : "";
    std::string said = join(phones);
    if (head.size() + said.size() + tail.size() > 64) {
      const std::string more = fmt::format(" ... ({} phones)", n);
      said.resize(std::max<size_t>(64 - std::min<size_t>(64, head.size() + tail.size() + more.size()), 8));
      said = said.substr(0, said.rfind(' ')) + more;
    }
    h.title = head + said + tail;
    h.x_label = "letters";
    h.y_label = "phones";
    h.row_labels = rows;
    h.col_labels = letters;
    h.width = 520, h.height = 480;
    ex::write_heatmap(fmt::format("{}/alignment_{}.png", out, words[i]), h);
    if (heads > 1) {
      ex::Heatmap ph = h;
      ph.weights = w.narrow(1, 0, n).unsqueeze(0).contiguous();  // (1, heads, n, S)
      ph.title = fmt::format("{}: cross-attention of the last decoder block, per head", words[i]);
      ph.width = static_cast<int>(300 * heads), ph.height = 360;
      ex::write_heatmap(fmt::format("{}/alignment_{}_heads.png", out, words[i]), ph);
    }
    ex::Diagonality d = ex::diagonality(mean, n);
    std::printf("  %-12s -> %-28s attention within ±2 letters of the diagonal %.2f (uniform %.2f)\n",
                words[i].c_str(), join(phones).c_str(), d.mass, d.chance);
  }
}

// "1 step", "20 steps"
std::string steps_text(int64_t n) { return fmt::format("{} step{}", n, n == 1 ? "" : "s"); }

}  // namespace

int main(int argc, char** argv) {
  saccade::use_best_blas_core(argv);  // OpenBLAS at the CPU's width (ops/blas.h); may re-execute once
  CLI::App app{"Grapheme-to-phoneme conversion on the CMU Pronouncing Dictionary (bahdanau or transformer)"};
  cli::setup(app);
  std::string model_name = "bahdanau", device_name = "cpu", out_dir = "g2p_out", checkpoint, words,
              dict_path = ex::kCmuDictPath;
  int64_t steps = 2500, batch_size = 128, beam = 5, val_every = 500, val_words = 1000, train_words = 0,
          test_words = 0, threads = 0;
  ex::G2PConfig shape;  // --d-model, --hidden, --layers, --dropout
  double lr = -1;
  uint64_t seed = 0;
  bool resume = false, eval_only = false, stress = false;
  std::string profile_trace;
  app.add_option("--model", model_name, "bahdanau or transformer")
      ->check(CLI::IsMember({"bahdanau", "transformer"}));
  app.add_option("--steps", steps, "training steps")->check(cli::integer(1));
  app.add_option("--batch-size", batch_size, "pronunciations per step")->check(cli::integer(1));
  app.add_option("--lr", lr, "Adam's peak learning rate (default: bahdanau 2e-3, transformer 1e-3)")
      ->check(cli::positive_real())
      ->default_str("");
  app.add_option("--seed", seed, "seed of the initial weights, dropout and the batch order")
      ->check(cli::seed());
  app.add_option("--threads", threads, "CPU threads (0: OMP_NUM_THREADS, else all cores)")
      ->check(cli::integer(0, 4096));
  app.add_option("--device", device_name, "cpu, or cuda / cuda:N when built with CUDA");
  app.add_option("--out", out_dir, "directory for checkpoints and pictures");
  app.add_option("--beam", beam, "beam width of the second evaluation (1: greedy only)")
      ->check(cli::integer(1, 256));
  app.add_flag(
      "--resume", resume,
      "continue from OUT/checkpoint.safetensors (without one: says so and starts fresh); model flags that "
      "differ from the checkpoint's are refused");
  app.add_option("--checkpoint", checkpoint,
                 "a trained model: pronounce --words (or stdin's words), or evaluate it with --eval-only");
  app.add_option("--words", words, "words to pronounce with --checkpoint, separated by spaces");
  app.add_flag("--eval-only", eval_only, "evaluate --checkpoint on the test split");
  app.add_option("--profile", profile_trace,
                 "profile steps 2-4: a Chrome trace (Perfetto, chrome://tracing) here, a PNG beside it");
  app.add_option("--val-every", val_every, "steps between validations (and checkpoints)")
      ->check(cli::integer(1));
  app.add_option("--val-words", val_words, "validation words decoded at each validation")
      ->check(cli::integer(1));
  app.add_option("--train-words", train_words, "use only the first N training words (0: all)")
      ->check(cli::integer(0));
  app.add_option("--test-words", test_words, "evaluate on the first N test words (0: all)")
      ->check(cli::integer(0));
  app.add_option("--d-model", shape.d_model, "transformer width")->check(cli::integer(1, 65536));
  app.add_option("--hidden", shape.hidden, "bahdanau GRU size")->check(cli::integer(1, 65536));
  app.add_option("--layers", shape.layers, "transformer blocks per stack")->check(cli::integer(1, 1024));
  app.add_option("--dropout", shape.dropout, "dropout probability")->check(cli::probability_below_one());
  app.add_option("--dict", dict_path, "the dictionary file (festlex-cmu)");
  app.add_flag("--stress", stress,
               "keep the stress digit on vowel phones (ae1, ax0): a harder task with more phones; a "
               "checkpoint remembers it");
  if (int rc = cli::parse(app, argc, argv, "g2p"); rc >= 0) return rc;

  try {
    // before any work: the paths and the device
    if (!profile_trace.empty()) cli::require_trace_path("--profile", profile_trace);
    const saccade::Device device = cli::device("--device", device_name);
    if (eval_only && checkpoint.empty()) throw cli::UsageError("--eval-only", "needs --checkpoint FILE");
    if (checkpoint.empty() && app.count("--words") > 0)
      throw cli::UsageError("--words", "needs --checkpoint FILE (the trained model that pronounces them)");
    // A trained model keeps its own settings, and only training reads the training flags.
    const std::vector<std::string> training_flags = {"--steps",     "--batch-size",  "--lr",
                                                     "--seed",      "--resume",      "--val-every",
                                                     "--val-words", "--train-words", "--profile"};
    const std::vector<std::string> model_flags = {"--model",  "--d-model", "--hidden",
                                                  "--layers", "--dropout", "--stress"};
    if (!checkpoint.empty() && !eval_only) {
      const std::string mode = "with --checkpoint (pronouncing with a trained model)";
      cli::refuse_flags(app, training_flags, mode);
      cli::refuse_flags(app, model_flags, mode + ": the checkpoint holds its model's settings");
      cli::refuse_flags(app, {"--out", "--test-words", "--dict"}, mode);
    }
    if (eval_only) cli::refuse_flags(app, training_flags, "with --eval-only (evaluating a trained model)");
    if (!checkpoint.empty()) cli::require_file("--checkpoint", checkpoint);
    if (threads > 0) saccade::set_num_threads(static_cast<int>(threads));

    // Using a trained model.
    if (!checkpoint.empty() && !eval_only) {
      ex::G2PConfig config = ex::G2PConfig::from_metadata(saccade::nn::load_safetensors(checkpoint).metadata);
      auto model = ex::make_g2p_model(config, seed);
      model->to(device);
      saccade::nn::load(*model, checkpoint);
      ex::G2PVocab vocab = ex::G2PVocab::from_string(config.phones);
      std::vector<std::string> list;
      std::istringstream in(words);
      for (std::string w; in >> w;) list.push_back(w);
      if (words.empty())
        for (std::string w; std::cin >> w;) list.push_back(w);
      if (list.empty()) return 0;
      std::vector<ex::Phones> out = ex::pronounce(*model, vocab, list, beam);
      for (size_t i = 0; i < list.size(); ++i) std::printf("%s\t%s\n", list[i].c_str(), join(out[i]).c_str());
      return 0;
    }

    if (app.count("--dict") > 0)
      cli::require_file("--dict", dict_path);  // the default's loader names its package
    const std::string last = out_dir + "/checkpoint.safetensors", best = out_dir + "/best.safetensors";
    const std::string source = eval_only ? checkpoint : last;
    const bool from_file = eval_only || (resume && std::filesystem::exists(last));
    // A model evaluated or resumed from a file keeps the settings it was trained with, --stress included;
    // a flag that names another model is refused.
    std::optional<ex::G2PConfig> saved;
    if (from_file) {
      saved = ex::G2PConfig::from_metadata(saccade::nn::load_safetensors(source).metadata);
      cli::require_same_model(app,
                              {{"--model", saved->model == model_name},
                               {"--d-model", saved->d_model == shape.d_model},
                               {"--hidden", saved->hidden == shape.hidden},
                               {"--layers", saved->layers == shape.layers},
                               {"--dropout", saved->dropout == shape.dropout},
                               {"--stress", saved->stress == stress}},
                              eval_only ? "--eval-only" : "--resume", source, saved->describe());
      stress = saved->stress;
    }
    cli::OutputDir out("--out", out_dir);  // removed again when the run fails before writing into it
    std::printf("device %s, %d CPU threads\n%s\n", device.str().c_str(), saccade::get_num_threads(),
                saccade::blas_info_line().c_str());
    if (resume && !from_file)
      std::printf("--resume: no checkpoint at %s: starting a fresh %s model\n", last.c_str(),
                  model_name.c_str());
    ex::CmuDict dict = ex::read_cmudict(dict_path, stress);
    if (dict.words.empty())
      throw cli::UsageError("--dict", fmt::format("'{}' holds no pronunciations (need the CMU dictionary's "
                                                  "format, as festlex-cmu's)",
                                                  dict_path));
    std::vector<ex::DictWord> train = ex::split_words(dict, ex::Split::Train),
                              val = ex::split_words(dict, ex::Split::Validation),
                              test = ex::split_words(dict, ex::Split::Test);
    std::printf("%s: %lld entries, %zu words (%lld dropped); train %zu, validation %zu, test %zu words\n",
                dict_path.c_str(), static_cast<long long>(dict.entries), dict.words.size(),
                static_cast<long long>(dict.dropped), train.size(), val.size(), test.size());
    if (train_words > 0 && train_words < static_cast<int64_t>(train.size()))
      train.resize(static_cast<size_t>(train_words));
    if (test_words > 0 && test_words < static_cast<int64_t>(test.size()))
      test.resize(static_cast<size_t>(test_words));

    ex::G2PConfig config = ex::G2PConfig::defaults(model_name);
    config.phones = ex::G2PVocab::from_words(dict.words).to_string();
    config.stress = stress;
    config.d_model = shape.d_model, config.hidden = shape.hidden, config.layers = shape.layers;
    config.dropout = shape.dropout;
    if (saved) config = *saved;
    ex::G2PVocab vocab = ex::G2PVocab::from_string(config.phones);
    auto model = ex::make_g2p_model(config, seed);
    model->to(device);
    std::printf("%s, %lld parameters\n", config.describe().c_str(),
                static_cast<long long>(model->num_parameters()));

    if (eval_only) {
      saccade::nn::load(*model, checkpoint);
    } else {
      ex::G2PTrainOptions opts;
      opts.steps = steps;
      opts.batch_size = batch_size;
      opts.lr = lr > 0 ? lr : (config.model == "bahdanau" ? 2e-3 : 1e-3);
      opts.seed = seed;
      opts.device = device;
      opts.checkpoint = last;
      opts.best = best;
      opts.resume = resume;
      opts.profile_trace = profile_trace;
      opts.val_every = val_every;
      opts.val_words = val_words;
      std::printf("training %lld steps of batch %lld, lr %g, on %zu words\n", static_cast<long long>(steps),
                  static_cast<long long>(batch_size), opts.lr, train.size());
      std::fflush(stdout);
      ex::G2PTrainResult tr = ex::train_g2p(*model, vocab, train, val, opts);
      if (tr.steps_done > 0)
        std::printf(
            "trained %lld steps in %.1f s (%.2f steps/s); training loss %.4f (the mean of the first %s) "
            "-> %.4f (of the last %s; the progress line's avg loss is a running average)\n",
            static_cast<long long>(tr.steps_done), tr.seconds, tr.steps_done / tr.seconds, tr.first_loss,
            steps_text(tr.first_steps).c_str(), tr.final_loss, steps_text(tr.final_steps).c_str());
      else
        std::printf("%s is at step %lld or later: nothing to train (--steps %lld)\n", last.c_str(),
                    static_cast<long long>(steps), static_cast<long long>(steps));
      if (std::filesystem::exists(best)) {
        saccade::nn::load(*model, best);
        std::printf("best validation WER %.4f (PER %.4f) at step %lld: evaluating %s\n", tr.best_wer,
                    tr.best_per, static_cast<long long>(tr.best_step), best.c_str());
      }
      std::printf("checkpoints in %s: checkpoint.safetensors (the last step, to --resume)%s\n",
                  out_dir.c_str(),
                  std::filesystem::exists(best) ? ", best.safetensors (the best validation WER)" : "");
    }

    std::printf("test split: %zu words\n", test.size());
    ex::G2PEval greedy = ex::evaluate_g2p(*model, vocab, test, 1);
    print_score("greedy", greedy);
    if (beam > 1)
      print_score(fmt::format("beam{}", beam).c_str(), ex::evaluate_g2p(*model, vocab, test, beam));
    for (size_t i = 0; i < std::min<size_t>(8, test.size()); ++i)
      std::printf("  %-14s predicted %-26s reference %s\n", test[i].word.c_str(),
                  join(greedy.predictions[i]).c_str(), join(test[i].pronunciations[0]).c_str());
    std::printf(ex::plots_available() ? "alignment pictures in %s:\n"
                                      : "alignments (pictures not drawn: built without PLplot; %s):\n",
                out_dir.c_str());
    write_pictures(*model, vocab, {"emphasis", "fixation", "kneading", "bought", "elephants", "exhibition"},
                   out_dir);
  } catch (const std::exception& e) {
    return cli::report("g2p", e);
  }
  return 0;
}
