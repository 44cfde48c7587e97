// The training log of a run folder: RUN_DIR/metrics.jsonl (one JSON object per line, flushed
// after every record, so a crash loses at most the line being written) and TensorBoard event
// files under RUN_DIR/tensorboard/. The trainer's callbacks feed it; it prints nothing.
//
// metrics.jsonl lines, each {"type", "step", "time" (unix seconds), ...}:
//   "step":    every StepReport field (loss, smoothed_loss, lr, grad_norm, tokens_per_second,
//              tokens_seen, epoch, max_steps, elapsed_seconds, eta_seconds, skipped_steps; with
//              more than one rank also ranks, allreduce_seconds, allreduce_wait_seconds and
//              allreduce_share; on a GPU run with NVML (RunLogOptions::sample_gpu) also gpu_name,
//              gpu_utilization_percent, gpu_memory_used_bytes, gpu_memory_peak_bytes,
//              gpu_memory_total_bytes and gpu_memory_scope ("process" or "device"))
//   "eval":    loss, perplexity, is_best
//   "sample":  prompt, text
//   "scalars": values: {tag: number}
// Non-finite numbers are written as null (JSON has no NaN).
//
// TensorBoard tags: train/loss, train/smoothed_loss, train/lr, train/grad_norm,
// train/tokens_per_second, train/allreduce_share (more than one rank), gpu/utilization_percent
// and gpu/memory_used_gib (GPU runs with NVML), val/loss, val/perplexity, free-form scalars
// under their own tag, and samples as text summaries sample/<i> (i counts the samples of one step).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/gpu_stats.h"
#include "core/status.h"
#include "train/tfevents.h"
#include "train/trainer.h"

namespace kipp::train {

inline constexpr const char* kMetricsFileName = "metrics.jsonl";
inline constexpr const char* kTensorBoardDirName = "tensorboard";

struct RunLogOptions {
  // Set when the run resumes from the checkpoint of this step: metrics.jsonl is kept up to that
  // step (later lines are dropped, atomically, since the run re-does those steps) and appended
  // to; a new event file starts with a SessionLog START at resume_step + 1, which makes
  // TensorBoard drop the older files' values for the re-done steps.
  // Unset (a new run): metrics.jsonl starts empty and stale event files in
  // RUN_DIR/tensorboard are removed.
  std::optional<uint64_t> resume_step;
  bool tensorboard = true;
  // Unix seconds for the "time" fields and event wall_time; the system clock when empty.
  std::function<double()> clock;
  // A GPU run's device figures for each step line (core/gpu_stats.h); empty on a CPU run. After
  // its first failure the lines go on without GPU fields (the dashboard says why).
  std::function<Expected<GpuSample>()> sample_gpu;
};

struct NamedScalar {
  std::string tag;
  double value = 0;
};

class RunLog {
 public:
  // Creates run_dir if needed. Fails on an unreadable metrics.jsonl, or, when resuming, on a
  // line that is not JSON (naming the line); an unterminated last line (a crash mid-write) is
  // dropped.
  static Expected<RunLog> open(const std::string& run_dir, const RunLogOptions& options = {});

  RunLog(RunLog&&) noexcept = default;
  RunLog& operator=(RunLog&&) noexcept = default;
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;
  ~RunLog() = default;

  Status record_step(const StepReport& report);
  Status record_eval(const EvalReport& report);
  // A text sample generated at `step` from `prompt` (text excludes the prompt).
  Status record_sample(uint64_t step, const std::string& prompt, const std::string& text);
  // Free-form scalars at `step` (one "scalars" line; one event with every tag).
  Status record_scalars(uint64_t step, const std::vector<NamedScalar>& values);
  Status record_scalar(uint64_t step, const std::string& tag, double value) {
    return record_scalars(step, {NamedScalar{tag, value}});
  }

  const std::string& metrics_path() const { return metrics_path_; }
  // The event file this log writes; empty when options.tensorboard is false.
  std::string events_path() const { return events_ ? events_->path() : std::string(); }

 private:
  struct Closer {
    void operator()(std::FILE* stream) const { std::fclose(stream); }
  };
  RunLog() = default;
  double now() const;
  Status append_line(const std::string& line);

  std::string metrics_path_;
  std::unique_ptr<std::FILE, Closer> metrics_;
  std::optional<EventFileWriter> events_;
  std::function<double()> clock_;
  std::function<Expected<GpuSample>()> sample_gpu_;
  uint64_t sample_step_ = 0;
  uint64_t samples_at_step_ = 0;
};

// Keeps the lines of a metrics.jsonl text whose "step" is <= max_step (and lines without a
// step), dropping an unterminated last line. Fails naming the first line that is not a JSON
// object. Exposed for tests.
Expected<std::string> trim_metrics_jsonl(const std::string& contents, uint64_t max_step);

}  // namespace kipp::train
