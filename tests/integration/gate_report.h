// PASS/FAIL lines of the gate programs (engine_gates, train_gates): every check prints one line
// with what it measured, and the program's exit status says whether any failed.
#pragma once

#include <cstdio>
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

}  // namespace kipp::gates
