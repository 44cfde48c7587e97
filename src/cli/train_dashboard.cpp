#include "cli/train_dashboard.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "cli/escape.h"

namespace kipp::cli {
namespace {

constexpr int kFallbackWidth = 80;
constexpr int kMinimumWidth = 20;
constexpr size_t kMaxBarWidth = 40;
constexpr size_t kMinBarWidth = 5;
constexpr size_t kCellGap = 3;  // spaces between the cells of a line

std::string printf_text(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string printf_text(const char* format, ...) {
  char text[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return text;
}

// Escape sequence starting at text[i] (ESC): its length. CSI (ESC [ ... final byte) and
// two-byte sequences; an unterminated one runs to the end.
size_t escape_length(std::string_view text, size_t i) {
  if (i + 1 >= text.size()) return text.size() - i;
  if (text[i + 1] != '[') return 2;
  size_t j = i + 2;
  while (j < text.size() && !(text[j] >= 0x40 && text[j] <= 0x7e)) ++j;
  return std::min(j + 1, text.size()) - i;
}

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

// Text from the trainer or the model, made harmless for a terminal: control bytes (ESC above
// all) become \xNN; newlines and tabs stay.
std::string terminal_safe(std::string_view text) {
  std::string safe;
  safe.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\n' && c != '\t') || byte == 0x7f) {
      safe += printf_text("\\x%02x", byte);
    } else {
      safe += c;
    }
  }
  return safe;
}

// One log line for any text: quoted, with control bytes escaped (\n, \t, \xNN).
std::string quoted(std::string_view text) { return "\"" + escape_text(std::string(text)) + "\""; }

enum class Overflow { Wrap, Cut };

// Every line of `text` within `columns` visible columns (escape sequences kept whole and not
// counted), so the terminal never wraps a line itself: the excess goes onto new lines, or is
// cut off (its escape sequences, such as a style reset, still kept).
std::string limit_width(std::string_view text, size_t columns, Overflow overflow) {
  std::string result;
  size_t used = 0;
  bool cutting = false;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\x1b') {
      const size_t length = escape_length(text, i);
      result.append(text.substr(i, length));
      i += length;
      continue;
    }
    if (text[i] == '\n') {
      used = 0;
      cutting = false;
    } else if (!is_continuation_byte(text[i])) {
      if (used == columns) {
        if (overflow == Overflow::Wrap) {
          result += '\n';
          used = 0;
        } else {
          cutting = true;
        }
      }
      ++used;
    }
    if (!cutting) result += text[i];
    ++i;
  }
  return result;
}

std::string with_newline(std::string text) {
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

std::string eval_line(const train::EvalReport& report) {
  return printf_text("eval step %llu: val loss %.3f, perplexity %.1f%s", static_cast<unsigned long long>(report.step),
                     report.loss, report.perplexity, report.is_best ? " (best)" : "");
}

std::string percent_text(uint64_t done, uint64_t total) {
  const double percent = total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0;
  return printf_text("%.1f%%", std::min(percent, 100.0));
}

std::string bar_text(uint64_t done, uint64_t total, size_t width) {
  const double fraction = total ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 0.0;
  const auto filled = static_cast<size_t>(fraction * static_cast<double>(width));
  std::string bar = "[";
  bar.append(filled, '=');
  if (filled < width) {
    bar += '>';
    bar.append(width - filled - 1, ' ');
  }
  return bar + "]";
}

std::string gpu_utilization_text(const GpuSample& sample) {
  return printf_text("gpu %.0f%%", sample.utilization_percent);
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto total = static_cast<uint64_t>(seconds + 0.5);
  const auto hours = static_cast<unsigned long long>(total / 3600);
  const auto minutes = static_cast<unsigned long long>(total / 60 % 60);
  const auto secs = static_cast<unsigned long long>(total % 60);
  if (hours) return printf_text("%llu:%02llu:%02llu", hours, minutes, secs);
  return printf_text("%02llu:%02llu", minutes, secs);
}

std::string format_thousands(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string result;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) result += ',';
    result += digits[i];
  }
  return result;
}

std::string format_rate(double per_second) {
  if (!std::isfinite(per_second) || per_second < 0) return "-";
  if (per_second < 100) return printf_text("%.1f", per_second);
  return format_thousands(static_cast<uint64_t>(per_second + 0.5));
}

std::string format_memory(uint64_t bytes) {
  const double value = static_cast<double>(bytes);
  if (bytes >= (1ull << 30)) return printf_text("%.2f GiB", value / double(1ull << 30));
  if (bytes >= (1ull << 20)) return printf_text("%.0f MiB", value / double(1ull << 20));
  if (bytes >= (1ull << 10)) return printf_text("%.0f KiB", value / double(1ull << 10));
  return printf_text("%llu B", static_cast<unsigned long long>(bytes));
}

std::string format_gpu_memory(const GpuSample& sample) {
  std::string text = sample.memory_scope == GpuMemoryScope::Device ? "vram (device) " : "vram ";
  text += format_memory(sample.memory_used_bytes) + " (peak " + format_memory(sample.memory_peak_bytes) + ")";
  if (sample.memory_total_bytes) text += " / " + format_memory(sample.memory_total_bytes);
  return text;
}

std::string fit_to_width(std::string_view text, size_t columns) { return limit_width(text, columns, Overflow::Cut); }

size_t display_width(std::string_view text) {
  size_t columns = 0;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\x1b') {
      i += escape_length(text, i);
      continue;
    }
    if (!is_continuation_byte(text[i])) ++columns;
    ++i;
  }
  return columns;
}

TerminalMode detect_terminal(std::FILE* stream, bool force_plain) {
  TerminalMode mode;
  mode.fd = ::fileno(stream);
  const char* term = std::getenv("TERM");
  const bool dumb = term != nullptr && std::strcmp(term, "dumb") == 0;
  mode.interactive = !force_plain && mode.fd >= 0 && ::isatty(mode.fd) == 1 && !dumb;
  mode.color = mode.interactive && std::getenv("NO_COLOR") == nullptr;
  return mode;
}

TrainDashboard::TrainDashboard(std::ostream& out, DashboardOptions options) : out_(out), options_(std::move(options)) {
  if (!options_.interactive) options_.color = false;
  if (!options_.clock) options_.clock = [] { return Clock::now(); };
  if (!options_.sample_process) {
    auto stats = std::make_shared<ProcessStats>();
    options_.sample_process = [stats] { return stats->sample(); };
  }
}

TrainDashboard::~TrainDashboard() { finish(); }

TrainDashboard::Clock::time_point TrainDashboard::now() const { return options_.clock(); }

std::string TrainDashboard::refresh_samples(Clock::time_point time) {
  if (last_process_sample_ && time - *last_process_sample_ < options_.process_sample_interval) return {};
  last_process_sample_ = time;
  auto sample = options_.sample_process();
  if (sample) process_ = *sample;
  if (!options_.sample_gpu) return {};
  auto gpu = options_.sample_gpu();
  if (!gpu) {
    options_.sample_gpu = nullptr;
    gpu_.reset();
    return "GPU stats unavailable: " + gpu.message() + "\n";
  }
  // The log lines carry the figures; the device's name goes above them once.
  const bool named = gpu_.has_value();
  gpu_ = std::move(*gpu);
  return named || options_.interactive ? std::string() : "gpu: " + gpu_->name + "\n";
}

void TrainDashboard::on_step(const train::StepReport& report) {
  std::lock_guard lock(mutex_);
  step_ = report;
  data_progress_.reset();
  const auto time = now();
  if (!options_.interactive || finished_) {
    const std::string notice = refresh_samples(time);
    write(notice + step_line() + "\n");
    return;
  }
  pending_ = true;
  const bool last = report.max_steps && report.step >= report.max_steps;
  if (!last && last_draw_ && time - *last_draw_ < options_.redraw_interval) return;
  redraw("");
}

void TrainDashboard::on_eval(const train::EvalReport& report) {
  std::lock_guard lock(mutex_);
  last_eval_ = report;
  if (report.is_best) best_eval_ = report;
  print_above(eval_line(report) + "\n");
}

void TrainDashboard::on_message(const std::string& message) {
  std::lock_guard lock(mutex_);
  print_above(with_newline(options_.interactive ? terminal_safe(message) : message));
}

void TrainDashboard::on_sample(uint64_t step, const std::string& prompt, const std::string& text) {
  std::lock_guard lock(mutex_);
  const auto step_number = static_cast<unsigned long long>(step);
  if (!options_.color) {
    print_above(printf_text("sample step %llu: ", step_number) + quoted(prompt) + " -> " + quoted(text) + "\n");
    return;
  }
  // The prompt dim, the continuation in the normal style, continuation lines indented.
  std::string body = "\x1b[2m" + terminal_safe(prompt) + "\x1b[0m" + terminal_safe(text);
  std::string indented = "  ";
  for (char c : body) {
    indented += c;
    if (c == '\n') indented += "  ";
  }
  print_above(printf_text("\x1b[1msample step %llu:\x1b[0m\n", step_number) + with_newline(indented));
}

void TrainDashboard::on_data_progress(const data::CacheProgress& progress) {
  std::lock_guard lock(mutex_);
  if (!options_.interactive || finished_) {
    if (progress.bytes_total == 0) return;
    const uint64_t done = std::min(progress.bytes_done, progress.bytes_total);
    const auto decile = static_cast<int>(10 * done / progress.bytes_total);
    if (decile <= data_progress_decile_) return;
    data_progress_decile_ = decile;
    write("tokenizing data: " + percent_text(progress.bytes_done, progress.bytes_total) + " (" +
          format_memory(progress.bytes_done) + " of " + format_memory(progress.bytes_total) + ", " +
          format_thousands(progress.tokens) + " tokens)\n");
    return;
  }
  if (step_) return;  // data built lazily during training: the panel keeps showing the steps
  data_progress_ = progress;
  pending_ = true;
  const auto time = now();
  const bool last = progress.bytes_done >= progress.bytes_total;
  if (!last && last_draw_ && time - *last_draw_ < options_.redraw_interval) return;
  redraw("");
}

void TrainDashboard::finish(std::string_view outcome) {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  outcome_ = std::string(outcome);
  if (options_.interactive && (drawn_lines_ > 0 || pending_)) {
    redraw("");
    if (options_.color) write("\x1b[0m");
  }
  drawn_lines_ = 0;  // the panel stays on screen; nothing erases it any more
  finished_ = true;
}

namespace {

// Data-parallel runs: "2 ranks, allreduce 12% of the step (3.1 ms, 1.0 ms after backward)".
std::string ranks_text(const train::StepReport& r) {
  return printf_text("%u ranks, allreduce %.0f%% of the step (%.1f ms, %.1f ms after backward)", r.ranks,
                     100 * r.allreduce_share, 1e3 * r.allreduce_seconds, 1e3 * r.allreduce_wait_seconds);
}

}  // namespace

std::string TrainDashboard::step_line() const {
  const train::StepReport& r = *step_;
  std::string line = printf_text("step %llu/%llu epoch %llu | loss %.3f (avg %.3f)",
                                 static_cast<unsigned long long>(r.step), static_cast<unsigned long long>(r.max_steps),
                                 static_cast<unsigned long long>(r.epoch), r.loss, r.smoothed_loss);
  if (last_eval_) line += printf_text(" | val %.3f", last_eval_->loss);
  line += printf_text(" | lr %.1e | gnorm %.2f | ", r.lr, r.grad_norm) + format_rate(r.tokens_per_second) + " tok/s";
  if (process_) {
    line += printf_text(" | cpu %.0f%% | rss ", process_->cpu_percent) + format_memory(process_->rss_bytes);
  }
  if (gpu_) line += " | " + gpu_utilization_text(*gpu_) + " | " + format_gpu_memory(*gpu_);
  if (r.skipped_steps) line += " | " + format_thousands(r.skipped_steps) + " skipped";
  if (r.ranks > 1) line += " | " + ranks_text(r);
  line += " | " + format_duration(r.elapsed_seconds) + " elapsed, ETA " + format_duration(r.eta_seconds);
  return line;
}

// Groups of cells; each group starts a new line and wraps onto more lines when narrow.
std::vector<std::vector<TrainDashboard::Cell>> TrainDashboard::panel_cells(int width) const {
  const size_t columns = static_cast<size_t>(width - 1);
  std::vector<std::vector<Cell>> groups;

  std::vector<Cell> title{{"kipp train", "1"}};
  if (!options_.run_name.empty()) title.push_back({options_.run_name, nullptr});
  if (!options_.run_dir.empty() && options_.run_dir != options_.run_name) title.push_back({options_.run_dir, "2"});
  if (!outcome_.empty()) title.push_back({"[" + outcome_ + "]", outcome_ == "finished" ? "32" : "33"});
  groups.push_back(std::move(title));

  if (!step_) {
    if (data_progress_) {
      const data::CacheProgress& p = *data_progress_;
      std::vector<Cell> data{{"tokenizing data", nullptr}};
      if (p.bytes_total) {
        data.push_back({percent_text(p.bytes_done, p.bytes_total), nullptr});
        data.push_back({format_memory(p.bytes_done) + " / " + format_memory(p.bytes_total), nullptr});
      }
      data.push_back({format_thousands(p.tokens) + " tokens", nullptr});
      groups.push_back(std::move(data));
    } else {
      groups.push_back({{"waiting for the first step", "2"}});
    }
  } else {
    const train::StepReport& r = *step_;
    // Progress: the bar takes what the line has left, within [kMinBarWidth, kMaxBarWidth].
    const std::string counter = "step " + format_thousands(r.step) + "/" + format_thousands(r.max_steps);
    const std::string percent = percent_text(r.step, r.max_steps);
    const std::string epoch = "epoch " + std::to_string(r.epoch);
    const size_t fixed = counter.size() + kCellGap + 2 + kCellGap + percent.size() + kCellGap + epoch.size();
    std::vector<Cell> progress{{counter, "1"}};
    if (columns > fixed + kMinBarWidth) {
      progress.push_back({bar_text(r.step, r.max_steps, std::min(kMaxBarWidth, columns - fixed)), "36"});
    }
    progress.push_back({percent, nullptr});
    progress.push_back({epoch, nullptr});
    groups.push_back(std::move(progress));

    std::vector<Cell> losses{{printf_text("loss %.4f", r.loss), nullptr},
                             {printf_text("avg %.4f", r.smoothed_loss), nullptr}};
    losses.push_back({last_eval_ ? printf_text("val %.4f (ppl %.1f)", last_eval_->loss, last_eval_->perplexity)
                                 : std::string("val -"),
                      nullptr});
    if (best_eval_) {
      losses.push_back({printf_text("best %.4f (ppl %.1f) @ %llu", best_eval_->loss, best_eval_->perplexity,
                                    static_cast<unsigned long long>(best_eval_->step)),
                        "32"});
    }
    groups.push_back(std::move(losses));

    groups.push_back({{printf_text("lr %.2e", r.lr), nullptr},
                      {printf_text("gnorm %.3f", r.grad_norm), nullptr},
                      {format_rate(r.tokens_per_second) + " tok/s", nullptr},
                      {format_thousands(r.tokens_seen) + " tokens", nullptr},
                      {"skipped " + format_thousands(r.skipped_steps), r.skipped_steps ? "33" : nullptr}});
    if (r.ranks > 1) groups.push_back({{ranks_text(r), nullptr}});
  }

  std::vector<Cell> system;
  if (process_) {
    const ProcessSample& p = *process_;
    system.push_back({printf_text("cpu %.0f%% (%u hw threads)", p.cpu_percent, p.hardware_threads), nullptr});
    const std::string peak = format_memory(p.peak_rss_bytes);
    system.push_back({"rss " + format_memory(p.rss_bytes) + " (peak " + peak + ")", nullptr});
  }
  if (!system.empty()) groups.push_back(std::move(system));
  if (gpu_) {
    groups.push_back({{gpu_->name.empty() ? std::string("gpu") : gpu_->name, nullptr},
                      {gpu_utilization_text(*gpu_), nullptr},
                      {format_gpu_memory(*gpu_), nullptr}});
  }

  if (step_) {
    groups.push_back({{"elapsed " + format_duration(step_->elapsed_seconds), nullptr},
                      {"ETA " + format_duration(step_->eta_seconds), nullptr}});
  }
  return groups;
}

std::vector<std::string> TrainDashboard::render(int width, bool styled) const {
  width = std::max(width, kMinimumWidth);
  // One column stays free: some terminals wrap as soon as the last column is written.
  const size_t columns = static_cast<size_t>(width - 1);
  std::vector<std::string> lines;
  for (const auto& group : panel_cells(width)) {
    std::string line;
    size_t used = 0;
    for (const Cell& cell : group) {
      size_t gap = used ? kCellGap : 0;
      if (used && used + gap + display_width(cell.text) > columns) {
        lines.push_back(std::move(line));
        line.clear();
        used = 0;
        gap = 0;
      }
      line.append(gap, ' ');
      used += gap;
      const std::string text = fit_to_width(cell.text, columns - used);
      used += display_width(text);
      if (styled && cell.style) {
        line += std::string("\x1b[") + cell.style + "m" + text + "\x1b[0m";
      } else {
        line += text;
      }
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::vector<std::string> TrainDashboard::panel_lines(int width) const {
  std::lock_guard lock(mutex_);
  return render(width, false);
}

void TrainDashboard::redraw(const std::string& lines_above) {
  const auto time = now();
  const std::string notice = refresh_samples(time);
  std::string frame;
  if (drawn_lines_ > 0) frame += "\r\x1b[" + std::to_string(drawn_lines_) + "A\x1b[J";
  frame += limit_width(terminal_safe(notice), static_cast<size_t>(std::max(terminal_width(), kMinimumWidth) - 1),
                       Overflow::Wrap);
  frame += lines_above;
  std::vector<std::string> lines = render(terminal_width(), options_.color);
  // A panel taller than the window cannot be reached by cursor-up: keep what fits.
  const int height = terminal_height();
  if (height > 1 && lines.size() > static_cast<size_t>(height - 1)) lines.resize(static_cast<size_t>(height - 1));
  for (const std::string& line : lines) frame += line + "\n";
  drawn_lines_ = static_cast<int>(lines.size());
  last_draw_ = time;
  pending_ = false;
  write(frame);
}

void TrainDashboard::print_above(const std::string& text) {
  if (options_.interactive && !finished_) {
    redraw(limit_width(text, static_cast<size_t>(std::max(terminal_width(), kMinimumWidth) - 1), Overflow::Wrap));
  } else {
    write(text);
  }
}

void TrainDashboard::write(const std::string& bytes) {
  out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out_.flush();
}

int TrainDashboard::terminal_width() const {
  if (options_.width > 0) return options_.width;
  winsize size{};
  if (options_.terminal_fd >= 0 && ::ioctl(options_.terminal_fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return kFallbackWidth;
}

int TrainDashboard::terminal_height() const {
  if (options_.width > 0) return 0;  // a fixed width (tests): no height limit
  winsize size{};
  if (options_.terminal_fd >= 0 && ::ioctl(options_.terminal_fd, TIOCGWINSZ, &size) == 0) return size.ws_row;
  return 0;
}

}  // namespace kipp::cli
