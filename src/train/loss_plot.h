// Loss curves of a run as a self-contained SVG, from RUN_DIR/metrics.jsonl (see run_log.h):
// the raw training loss (faint), the smoothed loss, and the validation loss as a line with
// points, over the step, with the unigram baseline as a dashed level. Non-finite values (null
// in the log) are skipped.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace kipp::train {

struct PlotPoint {
  double step = 0;
  double value = 0;
};

struct LossSeries {
  std::vector<PlotPoint> train_loss;     // "step" lines' loss
  std::vector<PlotPoint> smoothed_loss;  // "step" lines' smoothed_loss
  std::vector<PlotPoint> val_loss;       // "eval" lines' loss
  // The "scalars" value val/unigram_baseline: drawn as a dashed level line when present.
  std::optional<double> unigram_baseline;
};

struct LossPlotOptions {
  std::string title;       // shown above the plot; the run folder's name for `kipp plot`
  bool log_scale = false;  // log10 loss axis (non-positive values are then skipped)
  int width = 960;
  int height = 540;
};

// Parses metrics.jsonl text; `source` names it in errors ("<source> line 3: ...").
// Each series is sorted by step, the last line winning for a repeated step.
Expected<LossSeries> parse_loss_series(const std::string& jsonl, const std::string& source);
Expected<LossSeries> read_loss_series(const std::string& metrics_path);

std::string render_loss_svg(const LossSeries& series, const LossPlotOptions& options);

// Reads RUN_DIR/metrics.jsonl and writes the SVG to output_path (RUN_DIR/loss.svg when
// empty), atomically; returns the path written.
Expected<std::string> plot_run(const std::string& run_dir, std::string output_path, bool log_scale = false);

}  // namespace kipp::train
