// Small helpers every benchmark executable shares: failing loudly, timing, medians and the
// machine description recorded with each result.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kipp::bench {

using Clock = std::chrono::steady_clock;

[[noreturn]] inline void die(const std::string& program, const std::string& message) {
  std::cerr << program << ": " << message << "\n";
  std::exit(1);
}

template <typename T>
T must(Expected<T> value, const std::string& what) {
  if (!value.ok()) die("bench", what + ": " + value.message());
  return std::move(value).value();
}

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

}  // namespace kipp::bench
