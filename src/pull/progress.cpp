#include "pull/progress.h"

#include <unistd.h>

namespace kipp {
namespace {

constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
// Without a known total a log still gets a sign of life this often.
constexpr uint64_t kLogEveryBytes = 256ull << 20;
constexpr uint64_t kLogMinimumBytes = 16ull << 20;

}  // namespace

bool stream_is_terminal(std::FILE* stream) { return ::isatty(::fileno(stream)) == 1; }

std::string format_bytes(uint64_t bytes) {
  const double value = static_cast<double>(bytes);
  char text[32];
  if (bytes >= 1000ull * 1000 * 1000) {
    std::snprintf(text, sizeof text, "%.2f GB", value / 1e9);
  } else if (bytes >= 1000ull * 1000) {
    std::snprintf(text, sizeof text, "%.1f MB", value / 1e6);
  } else if (bytes >= 1000) {
    std::snprintf(text, sizeof text, "%.1f kB", value / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return text;
}

ProgressPrinter::ProgressPrinter(std::FILE* stream, bool interactive) : stream_(stream), interactive_(interactive) {}

ProgressPrinter::~ProgressPrinter() { interrupt(); }

void ProgressPrinter::interrupt() {
  if (line_open_) {
    std::fputc('\n', stream_);
    std::fflush(stream_);
    line_open_ = false;
  }
}

void ProgressPrinter::start_file(const DownloadProgress& progress) {
  interrupt();
  name_ = std::string(progress.name);
  start_bytes_ = progress.resumed_from;
  start_time_ = Clock::now();
  last_draw_ = {};
  last_decile_ = -1;
  last_logged_bytes_ = progress.done;
  if (progress.resumed_from > 0 && !progress.finished) {
    std::fprintf(stream_, "%s: resuming at %s\n", name_.c_str(), format_bytes(progress.resumed_from).c_str());
  }
}

std::string ProgressPrinter::describe(const DownloadProgress& progress) const {
  const double seconds = std::chrono::duration<double>(Clock::now() - start_time_).count();
  const uint64_t fetched = progress.done >= start_bytes_ ? progress.done - start_bytes_ : 0;
  const double rate = seconds > 0.05 ? static_cast<double>(fetched) / seconds / 1e6 : 0.0;
  char text[256];
  if (progress.total && *progress.total > 0) {
    const double percent = 100.0 * static_cast<double>(progress.done) / static_cast<double>(*progress.total);
    std::snprintf(text, sizeof text, "%s  %s / %s  %3.0f%%  %.1f MB/s", name_.c_str(),
                  format_bytes(progress.done).c_str(), format_bytes(*progress.total).c_str(), percent, rate);
  } else {
    std::snprintf(text, sizeof text, "%s  %s  %.1f MB/s", name_.c_str(), format_bytes(progress.done).c_str(), rate);
  }
  return text;
}

void ProgressPrinter::update(const DownloadProgress& progress) {
  // A new file, or the same file restarted from zero after a server ignored Range.
  if (progress.name != name_ || progress.done < last_done_) start_file(progress);
  last_done_ = progress.done;
  const auto now = Clock::now();
  if (interactive_) {
    if (!progress.finished && now - last_draw_ < kRedrawInterval) return;
    last_draw_ = now;
    // \x1b[K clears the rest of the line, so a shorter line leaves no trail.
    std::fprintf(stream_, "\r%s\x1b[K", describe(progress).c_str());
    line_open_ = true;
    if (progress.finished) interrupt();
    std::fflush(stream_);
    return;
  }
  // In a log, small files get only the caller's one-line summary.
  if (progress.total && *progress.total < kLogMinimumBytes) return;
  bool due = progress.finished;
  if (progress.total && *progress.total > 0) {
    const int decile = static_cast<int>(10 * progress.done / *progress.total);
    if (decile > last_decile_) {
      due = due || decile < 10 || last_decile_ < 0;
      last_decile_ = decile;
    }
  } else if (progress.done - last_logged_bytes_ >= kLogEveryBytes) {
    due = true;
    last_logged_bytes_ = progress.done;
  }
  if (!due) return;
  std::fprintf(stream_, "%s%s\n", describe(progress).c_str(), progress.finished ? "  verified" : "");
  std::fflush(stream_);
}

}  // namespace kipp
