// PASS/FAIL lines of the gate programs (engine_gates, train_gates, kernel_gates): every check
// prints one line with what it measured, and the program's exit status says whether any failed.
// Also the two measures the logit gates share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <span>
#include <string>

namespace kipp::gates {

inline int checks_run = 0;
inline int checks_failed = 0;

inline void report(bool passed, const std::string& what, const std::string& detail) {
  ++checks_run;
  if (!passed) ++checks_failed;
  std::printf("%s  %s: %s\n", passed ? "PASS" : "FAIL", what.c_str(), detail.c_str());
  std::fflush(stdout);
}

inline std::string scientific(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

// sum((a - b)^2) / sum(b^2), b being the expected values.
inline double nmse(std::span<const float> actual, std::span<const float> expected) {
  double error = 0, energy = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double diff = double(actual[i]) - double(expected[i]);
    error += diff * diff;
    energy += double(expected[i]) * double(expected[i]);
  }
  return energy > 0 ? error / energy : error;
}

// The first index of the largest value, as numpy's argmax.
inline size_t argmax(std::span<const float> values) {
  return static_cast<size_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

}  // namespace kipp::gates
