// `kipp train` progress: a live panel on a terminal, plain log lines otherwise.
//
// Terminal (interactive): a block of lines at the bottom of the output, redrawn in place by
// moving the cursor up over it and clearing to the end of the screen (no alternate screen, so
// the scrollback keeps everything printed above). Messages, evaluations and samples are printed
// above the panel, which is then drawn again below them. Step updates redraw at most once per
// redraw_interval; the last step, messages, evaluations and finish() always draw. Every panel
// line is cut to one column less than the terminal is wide, because a wrapped line would break
// the cursor-up count.
//
// Not a terminal (a log file, a pipe, --plain, TERM=dumb): one line per on_step call (the
// trainer already throttles those to log.every steps), one per message, evaluation and sample.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu_stats.h"
#include "core/process_stats.h"
#include "core/status.h"
#include "data/token_cache.h"
#include "train/trainer.h"

namespace kipp::cli {

struct DashboardOptions {
  using Clock = std::chrono::steady_clock;

  std::string run_name;  // shown in the panel's title line
  std::string run_dir;
  bool interactive = false;  // the redrawn panel; false: plain log lines
  bool color = false;        // SGR styling of the panel (only when interactive)
  // Columns of the terminal: > 0 fixes it (tests); 0 asks terminal_fd (TIOCGWINSZ) at every
  // redraw, so a resized window is followed, and falls back to 80.
  int width = 0;
  int terminal_fd = -1;
  std::chrono::milliseconds redraw_interval{250};
  // CPU% and RSS are sampled at most this often; CPU% covers the time since the last sample.
  std::chrono::milliseconds process_sample_interval{1000};
  // Injected for tests; empty means steady_clock::now and a ProcessStats of this process.
  std::function<Clock::time_point()> clock;
  std::function<Expected<ProcessSample>()> sample_process;
  // A GPU run's device figures, sampled with the process's (core/gpu_stats.h); empty: a CPU
  // run, no GPU figures. Its first failure is shown once as "GPU stats unavailable: <why>" and
  // it is not called again.
  std::function<Expected<GpuSample>()> sample_gpu;
};

// Whether `stream` gets the interactive panel: it is a terminal, TERM is not "dumb" and the
// user did not ask for plain output; color unless NO_COLOR is set (to anything).
struct TerminalMode {
  bool interactive = false;
  bool color = false;
  int fd = -1;
};
TerminalMode detect_terminal(std::FILE* stream, bool force_plain);

class TrainDashboard {
 public:
  using Clock = DashboardOptions::Clock;

  // Writes to `out` (kipp train: std::cerr), which must outlive the dashboard. Each frame is
  // written with one write and a flush.
  TrainDashboard(std::ostream& out, DashboardOptions options);
  ~TrainDashboard();  // finish() if it was not called
  TrainDashboard(const TrainDashboard&) = delete;
  TrainDashboard& operator=(const TrainDashboard&) = delete;

  void on_step(const train::StepReport& report);
  void on_eval(const train::EvalReport& report);
  void on_message(const std::string& message);
  void on_sample(uint64_t step, const std::string& prompt, const std::string& text);
  void on_sample(const train::SampleReport& sample) { on_sample(sample.step, sample.prompt, sample.text); }
  // While the training data is tokenized (before the first step).
  void on_data_progress(const data::CacheProgress& progress);

  // Draws the final state (with `outcome`, e.g. "finished" or "stopped", in the title) and
  // leaves the panel in place, the cursor on the line below it and the colors reset. Later
  // messages print as plain lines. Safe to call twice.
  void finish(std::string_view outcome = {});

  // The panel as it would be drawn now at `width` columns, without escape sequences (tests).
  std::vector<std::string> panel_lines(int width) const;

 private:
  struct Cell {
    std::string text;
    const char* style = nullptr;  // SGR parameters, e.g. "1" for bold; nullptr: none
  };

  Clock::time_point now() const;
  // Samples the process (and the GPU) when process_sample_interval has passed; returns a notice
  // to print above the figures (ending in '\n'), or nothing.
  std::string refresh_samples(Clock::time_point now);
  std::string step_line() const;  // plain mode
  std::vector<std::vector<Cell>> panel_cells(int width) const;
  std::vector<std::string> render(int width, bool styled) const;
  // Interactive: erases the panel, prints `lines_above` (already ending in '\n'), draws the panel.
  void redraw(const std::string& lines_above);
  void print_above(const std::string& text);  // both modes: text ends in '\n'
  void write(const std::string& bytes);
  int terminal_width() const;
  int terminal_height() const;

  std::ostream& out_;
  DashboardOptions options_;
  mutable std::mutex mutex_;

  std::optional<train::StepReport> step_;
  std::optional<train::EvalReport> last_eval_;
  std::optional<train::EvalReport> best_eval_;
  std::optional<data::CacheProgress> data_progress_;
  int data_progress_decile_ = -1;  // plain mode: the last logged tenth
  std::optional<ProcessSample> process_;
  std::optional<Clock::time_point> last_process_sample_;
  std::optional<GpuSample> gpu_;

  int drawn_lines_ = 0;  // panel lines on screen below the scrollback
  std::optional<Clock::time_point> last_draw_;
  bool pending_ = false;  // state changed since the last draw
  bool finished_ = false;
  std::string outcome_;
};

// Human-readable numbers, shared by the panel and the log lines.
std::string format_duration(double seconds);   // "00:56", "03:44", "1:02:03"; "--:--" unknown
std::string format_thousands(uint64_t value);  // "2,150"
std::string format_rate(double per_second);    // "2,150"; "2.5" below 100
std::string format_memory(uint64_t bytes);     // "412 MiB", "1.23 GiB" ("12 KiB", "5 B" when small)
// "vram 10.00 GiB (peak 12.00 GiB) / 80.00 GiB"; "vram (device) ..." when the figures count the
// whole device rather than this process; no " / total" when the total is unknown (0).
std::string format_gpu_memory(const GpuSample& sample);
// Columns `text` takes: escape sequences take none, a UTF-8 code point one.
size_t display_width(std::string_view text);
// `text` cut to at most `columns` columns, escape sequences kept whole.
std::string fit_to_width(std::string_view text, size_t columns);

}  // namespace kipp::cli
