// Download progress on a terminal (one line, redrawn in place) or in a log (a line per ~10%).
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "pull/downloader.h"

namespace kipp {

class ProgressPrinter {
 public:
  // `interactive`: the stream is a terminal (see stream_is_terminal).
  ProgressPrinter(std::FILE* stream, bool interactive);
  ~ProgressPrinter();
  ProgressPrinter(const ProgressPrinter&) = delete;
  ProgressPrinter& operator=(const ProgressPrinter&) = delete;

  void update(const DownloadProgress& progress);
  // Ends a half-drawn terminal line, e.g. before an error message is printed.
  void interrupt();

 private:
  using Clock = std::chrono::steady_clock;
  void start_file(const DownloadProgress& progress);
  std::string describe(const DownloadProgress& progress) const;

  std::FILE* stream_;
  bool interactive_;
  std::string name_;
  uint64_t start_bytes_ = 0;
  Clock::time_point start_time_{};
  Clock::time_point last_draw_{};
  int last_decile_ = -1;
  uint64_t last_logged_bytes_ = 0;
  uint64_t last_done_ = 0;
  bool line_open_ = false;
};

bool stream_is_terminal(std::FILE* stream);

// "1.2 GB", "350.0 MB", "12.3 kB", "12 B" (decimal units, as the Hub shows sizes).
std::string format_bytes(uint64_t bytes);

}  // namespace kipp
