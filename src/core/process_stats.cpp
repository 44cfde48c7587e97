#include "core/process_stats.h"

#include <sys/resource.h>
#include <time.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

namespace kipp {
namespace {

// The value of a "Name:   1234 kB" line of /proc/self/status, in bytes.
std::optional<uint64_t> status_kilobytes(const char* line, const char* name) {
  const size_t length = std::strlen(name);
  if (std::strncmp(line, name, length) != 0 || line[length] != ':') return std::nullopt;
  unsigned long long kilobytes = 0;
  if (std::sscanf(line + length + 1, " %llu", &kilobytes) != 1) return std::nullopt;
  return static_cast<uint64_t>(kilobytes) * 1024;
}

}  // namespace

Expected<ProcessMemory> read_process_memory() {
  std::optional<uint64_t> rss, peak;
  if (std::FILE* file = std::fopen("/proc/self/status", "re")) {
    char line[256];
    while ((!rss || !peak) && std::fgets(line, sizeof line, file)) {
      if (auto value = status_kilobytes(line, "VmRSS")) rss = value;
      if (auto value = status_kilobytes(line, "VmHWM")) peak = value;
    }
    std::fclose(file);
  }
  if (!peak) {
    struct rusage usage {};
    if (getrusage(RUSAGE_SELF, &usage) == 0) peak = static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // kB on Linux
  }
  if (!rss) return make_error("/proc/self/status: no VmRSS line (not Linux, or /proc not mounted)");
  ProcessMemory memory;
  memory.rss_bytes = *rss;
  // VmHWM is updated lazily by the kernel and can trail VmRSS by a little.
  memory.peak_rss_bytes = peak && *peak > *rss ? *peak : *rss;
  return memory;
}

double process_cpu_seconds() {
  timespec now{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now) == 0) {
    return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
  }
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

unsigned hardware_thread_count() {
  const unsigned count = std::thread::hardware_concurrency();
  return count ? count : 1;
}

ProcessStats::ProcessStats()
    : last_wall_(Clock::now()), last_cpu_seconds_(process_cpu_seconds()), hardware_threads_(hardware_thread_count()) {}

Expected<ProcessSample> ProcessStats::sample() {
  const Clock::time_point wall = Clock::now();
  const double cpu = process_cpu_seconds();
  ProcessSample result;
  result.interval_seconds = std::chrono::duration<double>(wall - last_wall_).count();
  if (result.interval_seconds > 0) result.cpu_percent = 100.0 * (cpu - last_cpu_seconds_) / result.interval_seconds;
  if (result.cpu_percent < 0) result.cpu_percent = 0;
  last_wall_ = wall;
  last_cpu_seconds_ = cpu;
  result.hardware_threads = hardware_threads_;
  KIPP_ASSIGN_OR_RETURN(const ProcessMemory memory, read_process_memory());
  result.rss_bytes = memory.rss_bytes;
  result.peak_rss_bytes = memory.peak_rss_bytes;
  return result;
}

}  // namespace kipp
