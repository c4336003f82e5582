// nw_regression: d2l's "Attention Pooling: Nadaraya-Watson Kernel Regression" (v0.17 / zh-v2 section 10.2)
// with the kernels and widths of d2l 1.0 section 11.2. Prints the test MSE of every method against the
// noiseless truth and writes the fits and the attention heatmaps as PNGs. See examples/README.md.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "examples/common/cli.h"
#include "examples/common/nw_data.h"
#include "examples/common/plots.h"
#include "examples/nw_regression/nw_regression.h"
#include "ops/blas.h"
#include "ops/join.h"
#include "ops/tensor.h"
#include "ops/threads.h"

namespace ex = saccade::examples;
namespace cli = saccade::examples::cli;
namespace nn = saccade::nn;
using saccade::Tensor;

namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

ex::Series line(const Tensor& x, const Tensor& y, std::string label,
                ex::Series::Style style = ex::Series::Style::Line) {
  return {values(x), values(y), std::move(label), style};
}

// Truth curve and training points: the first two series of every fit plot.
ex::LinePlot fit_plot(const ex::NwData& d, std::string title) {
  ex::LinePlot p;
  p.title = std::move(title);
  // Large enough that the legend (top left, fixed text size) leaves the curves readable.
  p.width = 1100, p.height = 800;
  p.series.push_back(line(d.x_test, d.y_truth, "truth"));
  p.series.push_back(line(d.x_train, d.y_train, "training points", ex::Series::Style::Points));
  return p;
}

std::string fmt_width(double w) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", w);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  saccade::use_best_blas_core(argv);  // OpenBLAS at the CPU's width (ops/blas.h); may re-execute once
  CLI::App app{"Nadaraya-Watson attention pooling on d2l's toy regression (y = 2 sin x + x^0.8 + noise)"};
  cli::setup(app);
  uint64_t seed = 0;
  int64_t epochs = 50, threads = 0;
  double lr = 0.5;
  std::string out = "out/nw_regression", profile_trace;
  app.add_option("--seed", seed, "seed of the data and of the parametric model's initial w")
      ->check(cli::seed());
  app.add_option("--epochs", epochs, "epochs of the long parametric run (the d2l run has 5)")
      ->check(cli::integer(1, 1000000));
  app.add_option("--lr", lr, "SGD learning rate of the parametric model")
      ->check(cli::real(0, false, 100, true));
  app.add_option("--profile", profile_trace,
                 "profile epochs 2-4 of the long parametric run: a Chrome trace here, a PNG beside it");
  app.add_option("--out", out, "directory for the PNGs (created if missing)");
  app.add_option("--threads", threads, "CPU threads (0: OMP_NUM_THREADS, else all cores)")
      ->check(cli::integer(0, 4096));
  if (int rc = cli::parse(app, argc, argv, "nw_regression"); rc >= 0) return rc;

  try {
    if (!profile_trace.empty()) cli::require_trace_path("--profile", profile_trace);  // before any work
    cli::OutputDir out_dir("--out", out);  // removed again when the run fails before writing into it
    if (threads > 0) saccade::set_num_threads(static_cast<int>(threads));
    const ex::NwData d = ex::make_nw_data(seed);
    std::printf("%s\n", saccade::blas_info_line().c_str());
    std::printf(
        "Nadaraya-Watson regression (d2l 10.2): %lld training points, %lld test queries, seed %llu\n\n",
        static_cast<long long>(d.x_train.numel()), static_cast<long long>(d.x_test.numel()),
        static_cast<unsigned long long>(seed));

    // ---- parametric NW: the d2l run (5 epochs) and a longer one, from the same initial w ----
    auto train = [&](int64_t n) {
      std::printf("parametric NW, %lld epochs of full-batch SGD (lr %g) on leave-one-out keys:\n",
                  static_cast<long long>(n), lr);
      ex::ParametricRun run = ex::train_parametric_nw(
          d, {.epochs = n, .lr = lr, .seed = seed, .profile_trace = n == epochs ? profile_trace : ""});
      std::printf("  initial w %.4f\n", run.w_init);
      // The long run starts like the short one: print its first 5 epochs once.
      if (n > 5) std::printf("  epochs 1-5 as above\n");
      for (size_t e = n > 5 ? 5 : 0; e < run.epoch_loss.size(); ++e)
        if (n <= 10 || (e + 1) % 10 == 0 || e + 1 == run.epoch_loss.size())
          std::printf("  epoch %3zu  loss %10.6f  w %.4f\n", e + 1, run.epoch_loss[e], run.epoch_w[e]);
      std::printf("\n");
      return run;
    };
    ex::ParametricRun short_run = train(5);
    // --epochs 5 is the d2l run itself: one section, one table row, one curve
    const bool one_run = epochs == 5;
    ex::ParametricRun long_run = one_run ? short_run : train(epochs);

    // ---- the table ----
    const double widths[] = {0.1, 0.2, 0.5, 1.0};
    const nn::Kernel kernels[] = {nn::Kernel::Gaussian, nn::Kernel::Boxcar, nn::Kernel::Epanechnikov};
    std::printf("%-34s %10s  %s\n", "method", "test MSE",
                "(against the noiseless truth at the 50 test points)");
    auto row = [](const std::string& name, const ex::NwFit& fit, double m) {
      std::printf("%-34s %10.4f", name.c_str(), m);
      if (fit.empty_rows > 0)
        std::printf("  (%lld queries with no key in the window predict 0)",
                    static_cast<long long>(fit.empty_rows));
      std::printf("\n");
    };
    ex::NwFit avg = ex::average_pooling(d.x_test, d.y_train);
    row("average pooling", avg, ex::mse(avg.y_hat, d.y_truth));

    std::vector<std::vector<ex::NwFit>> fits;  // [kernel][width]
    for (nn::Kernel k : kernels) {
      fits.emplace_back();
      for (double w : widths) {
        fits.back().push_back(ex::nonparametric_nw(d.x_test, d.x_train, d.y_train, k, w));
        row("NW " + ex::kernel_name(k) + ", width " + fmt_width(w), fits.back().back(),
            ex::mse(fits.back().back().y_hat, d.y_truth));
      }
    }
    char name[64];
    std::snprintf(name, sizeof name, "parametric NW, 5 epochs, w %.3f", short_run.w);
    row(name, short_run.fit, ex::mse(short_run.fit.y_hat, d.y_truth));
    std::snprintf(name, sizeof name, "parametric NW, %lld epochs, w %.3f", static_cast<long long>(epochs),
                  long_run.w);
    if (!one_run) row(name, long_run.fit, ex::mse(long_run.fit.y_hat, d.y_truth));

    // ---- pictures ----
    std::vector<std::string> written;
    auto save_plot = [&](const std::string& file, const ex::LinePlot& p) {
      ex::write_line_plot(out + "/" + file, p);
      written.push_back(out + "/" + file);
    };
    auto save_heatmap = [&](const std::string& file, const ex::Heatmap& h) {
      ex::write_heatmap(out + "/" + file, h);
      written.push_back(out + "/" + file);
    };
    for (size_t k = 0; k < std::size(kernels); ++k) {
      std::string kn = ex::kernel_name(kernels[k]);
      ex::LinePlot p = fit_plot(d, "Nadaraya-Watson, " + kn + " kernel");
      for (size_t i = 0; i < std::size(widths); ++i)
        p.series.push_back(line(d.x_test, fits[k][i].y_hat, "width " + fmt_width(widths[i]),
                                i % 2 ? ex::Series::Style::Dashed : ex::Series::Style::Line));
      save_plot("fit_" + kn + ".png", p);
    }
    ex::LinePlot p = fit_plot(d, "Average pooling, nonparametric and parametric attention pooling");
    p.series.push_back(line(d.x_test, avg.y_hat, "average pooling", ex::Series::Style::Dashed));
    p.series.push_back(line(d.x_test, fits[0][3].y_hat, "NW gaussian, width 1"));
    p.series.push_back(line(d.x_test, short_run.fit.y_hat, "parametric, 5 epochs"));
    if (!one_run)
      p.series.push_back(line(d.x_test, long_run.fit.y_hat,
                              "parametric, " + std::to_string(epochs) + " epochs",
                              ex::Series::Style::Dashed));
    save_plot("fit_parametric.png", p);

    ex::LinePlot lp;
    lp.title = "Parametric NW: training loss (summed over the 50 training queries)";
    lp.x_label = "epoch";
    lp.y_label = "loss";
    ex::Series ls{{}, long_run.epoch_loss, "loss", ex::Series::Style::Line};
    for (size_t e = 0; e < long_run.epoch_loss.size(); ++e) ls.x.push_back(static_cast<double>(e + 1));
    lp.series.push_back(ls);
    save_plot("loss_parametric.png", lp);

    auto heat = [&](const Tensor& w, std::string title) {
      ex::Heatmap h;
      h.weights = w;
      h.title = std::move(title);
      h.x_label = "sorted training inputs (keys)";
      h.y_label = "testing inputs (queries)";
      return h;
    };
    save_heatmap("attention_gaussian.png",
                 heat(fits[0][3].attention, "Nonparametric NW, gaussian kernel, width 1"));
    std::vector<Tensor> panels;
    for (size_t i = 0; i < std::size(widths); ++i) panels.push_back(fits[0][i].attention);
    // (2, 2, Q, K): the gaussian kernel at each width, in reading order.
    Tensor grid = saccade::ops::stack(panels, 0).reshape({2, 2, d.x_test.numel(), d.x_train.numel()});
    save_heatmap("attention_gaussian_widths.png",
                 heat(grid, "Nonparametric NW, gaussian kernel, widths 0.1, 0.2 (top), 0.5, 1 (bottom)"));
    save_heatmap("attention_parametric.png",
                 heat(short_run.fit.attention, "Parametric NW after 5 epochs, w " + fmt_width(short_run.w)));
    save_heatmap("attention_parametric_long.png",
                 heat(long_run.fit.attention, "Parametric NW after " + std::to_string(epochs) +
                                                  " epochs, w " + fmt_width(long_run.w)));
    std::printf(ex::plots_available() ? "\nwrote" : "\nnot drawn (built without PLplot):");
    for (const std::string& f : written) std::printf(" %s", f.c_str());
    std::printf("\n");
  } catch (const std::exception& e) {
    return cli::report("nw_regression", e);
  }
  return 0;
}
