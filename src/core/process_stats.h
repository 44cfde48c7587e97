// What this process costs the machine right now: CPU use since the previous sample (in percent
// of one core, so 190% is almost two busy cores), resident memory and its peak, and the number
// of hardware threads. Linux: CPU time from clock_gettime(CLOCK_PROCESS_CPUTIME_ID), memory
// from /proc/self/status. One sample costs a system call and a small file read (tens of
// microseconds), cheap enough for once a second.
#pragma once

#include <chrono>
#include <cstdint>

#include "core/status.h"

namespace kipp {

struct ProcessMemory {
  uint64_t rss_bytes = 0;       // VmRSS: resident now
  uint64_t peak_rss_bytes = 0;  // VmHWM: the most resident so far
};

// Reads VmRSS and VmHWM from /proc/self/status. Where that file or either field is missing, the
// peak falls back to getrusage's ru_maxrss and the current size to an error.
Expected<ProcessMemory> read_process_memory();

// CPU time (user + system, all threads) this process has used since it started.
double process_cpu_seconds();

// Hardware threads the machine offers (std::thread::hardware_concurrency, at least 1).
unsigned hardware_thread_count();

struct ProcessSample {
  double cpu_percent = 0;       // since the previous sample (or construction); 100 = one core
  double interval_seconds = 0;  // the wall time that cpu_percent covers
  uint64_t rss_bytes = 0;
  uint64_t peak_rss_bytes = 0;
  unsigned hardware_threads = 0;
};

// Differences successive samples. Not thread-safe: one owner samples.
class ProcessStats {
 public:
  using Clock = std::chrono::steady_clock;

  ProcessStats();  // the first sample() covers the time since construction

  // CPU use since the last call, and the memory now. With no wall time passed (two calls in the
  // same clock tick) cpu_percent is 0.
  Expected<ProcessSample> sample();

 private:
  Clock::time_point last_wall_;
  double last_cpu_seconds_ = 0;
  unsigned hardware_threads_ = 1;
};

}  // namespace kipp
