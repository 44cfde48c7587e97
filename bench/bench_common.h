// Small helpers the benchmark executables share: failing loudly, timing, medians, option values,
// the machine and command recorded with each result, and writing the result.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/files.h"
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

// The value of the option argv[i], stepping `i` onto it; dies when the command line ends first.
inline std::string option_value(const std::string& program, int argc, char** argv, int& i) {
  if (i + 1 >= argc) die(program, std::string(argv[i]) + " needs a value");
  return argv[++i];
}

// The non-empty items of a comma-separated list.
inline std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream stream(list);
  for (std::string item; std::getline(stream, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

// `text` as a positive whole number; dies naming `what` otherwise.
inline size_t parse_count(const std::string& program, const std::string& text, const std::string& what) {
  size_t used = 0;
  unsigned long value = 0;
  try {
    value = std::stoul(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value == 0) die(program, what + " must be a positive whole number, got '" + text + "'");
  return value;
}

// Records the machine and the command line (as run from the repository root) in `result`.
inline void record_machine_and_command(nlohmann::json& result, const std::string& program, int argc, char** argv) {
  result["machine"] = {{"cpu", cpu_model()}, {"hardware_threads", std::thread::hardware_concurrency()}};
  std::string command = "build/release/bench/" + program;
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  result["command"] = command;
}

// Prints `result` on stdout and, unless `out_path` is empty, writes it there too.
inline void write_result(const std::string& program, const nlohmann::json& result, const std::string& out_path) {
  const std::string text = result.dump(2) + "\n";
  std::cout << text;
  if (!out_path.empty()) {
    const Status written = write_file_atomic(
        out_path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
    if (!written.ok()) die(program, written.message());
  }
}

}  // namespace kipp::bench
