// `kipp plot RUN_DIR`: the loss curves of a training run (RUN_DIR/metrics.jsonl) as an SVG.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "train/loss_plot.h"

namespace kipp::cli {
namespace {

constexpr const char* kPlotFooter = R"(
Draws the training loss (faint), its smoothed curve and the validation loss against the step,
from the metrics.jsonl that kipp train writes into its run folder; works on a run that is
still training. TensorBoard reads the same run: tensorboard --logdir RUN_DIR/tensorboard

Examples:
  kipp plot runs/try                 writes runs/try/loss.svg
  kipp plot runs/try -o try.svg --log-y)";

struct PlotArgs {
  std::string run_dir;
  std::string output;
  bool log_y = false;
};

int run_plot(const PlotArgs& args) {
  const Expected<std::string> written = train::plot_run(args.run_dir, args.output, args.log_y);
  if (!written.ok()) return fail(written.message());
  std::printf("%s\n", written->c_str());
  return 0;
}

}  // namespace

void register_plot(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("plot", "Plot a training run's loss curves as an SVG");
  command->footer(kPlotFooter);
  auto args = std::make_shared<PlotArgs>();
  command->add_option("run_dir", args->run_dir, "Run folder (run.dir, holding metrics.jsonl)")->required();
  command->add_option("-o,--output", args->output, "SVG file to write (default: RUN_DIR/loss.svg)");
  command->add_flag("--log-y", args->log_y, "Logarithmic loss axis");
  command->callback([&action, args] { action = [args] { return run_plot(*args); }; });
}

}  // namespace kipp::cli
