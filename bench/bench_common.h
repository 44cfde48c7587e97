// Small helpers the benchmark executables share: failing loudly, timing passes on threads,
// medians, option values, the machine, command and bandwidth recorded with each result, and
// writing the result.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/files.h"
#include "core/machine_info.h"
#include "core/status.h"
#include "kernels/cpu/machine_probe.h"

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

// The options the kernel benchmarks share.
struct CommonOptions {
  size_t passes = 7;
  size_t threads = 2;
  std::string out_path;
};

// Takes argv[i] when it is --passes, --threads or --out (stepping `i` onto its value) and
// returns true; false for any other argument.
inline bool take_common_option(const std::string& program, int argc, char** argv, int& i, CommonOptions& options) {
  const std::string arg = argv[i];
  if (arg == "--passes") {
    options.passes = parse_count(program, option_value(program, argc, argv, i), arg);
  } else if (arg == "--threads") {
    options.threads = parse_count(program, option_value(program, argc, argv, i), arg);
  } else if (arg == "--out") {
    options.out_path = option_value(program, argc, argv, i);
  } else {
    return false;
  }
  return true;
}

// A comma-separated list of positive whole numbers; dies naming `what` when it holds none or a
// bad one.
inline std::vector<size_t> parse_counts(const std::string& program, const std::string& list, const std::string& what) {
  std::vector<size_t> counts;
  for (const std::string& item : split_list(list)) counts.push_back(parse_count(program, item, what));
  if (counts.empty()) die(program, what + " needs at least one value");
  return counts;
}

// What time_passes measured: the median pass, and the median read bandwidth of the probe
// passes taken between them (the same moments of a shared host; 0 without a probe).
struct PassTimes {
  double median_seconds = 0;
  double bandwidth_alongside_gb_per_second = 0;
};

// `passes` timed passes after one untimed warm-up (pages touched, caches and threads started
// once), where a pass runs thread_body(t) on `threads` threads t at once. With `alongside`, one
// pass of the probe after each (BandwidthProbe::timed_pass_between_runs).
template <typename ThreadBody>
PassTimes time_passes(size_t threads, size_t passes, const ThreadBody& thread_body,
                      kipp::kernels::BandwidthProbe* alongside) {
  const auto pass = [&] {
    std::vector<std::thread> workers;
    for (size_t t = 0; t < threads; ++t) workers.emplace_back([&, t] { thread_body(t); });
    for (std::thread& worker : workers) worker.join();
  };
  pass();
  std::vector<double> times, bandwidths;
  const double probe_gigabytes =
      alongside == nullptr ? 0.0 : static_cast<double>(alongside->result().buffer_bytes) / 1e9;
  for (size_t p = 0; p < passes; ++p) {
    const Clock::time_point start = Clock::now();
    pass();
    times.push_back(seconds_since(start));
    if (alongside == nullptr) continue;
    bandwidths.push_back(probe_gigabytes / must(alongside->timed_pass_between_runs(), "bandwidth probe"));
  }
  return {median(std::move(times)), bandwidths.empty() ? 0.0 : median(std::move(bandwidths))};
}

// Records the machine and the command line (as run from the repository root) in `result`.
inline void record_machine_and_command(nlohmann::json& result, const std::string& program, int argc, char** argv) {
  result["machine"] = kipp::machine_json(kipp::read_machine_info());
  std::string command = "build/release/bench/" + program;
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  result["command"] = command;
}

// A result started with the machine, the command, the kernel table, the thread count and the
// read bandwidth probed on those threads (also printed on stderr), that bandwidth, and the probe
// for time_passes to take passes between the timed ones.
struct StartedResult {
  nlohmann::json result;
  kipp::kernels::BandwidthResult bandwidth;
  std::unique_ptr<kipp::kernels::BandwidthProbe> probe;  // kept for passes between the timed ones
};

inline StartedResult start_result(const std::string& program, int argc, char** argv, const char* kernels,
                                  size_t threads) {
  StartedResult started;
  started.probe = must(kipp::kernels::BandwidthProbe::create(static_cast<uint32_t>(threads)), "bandwidth probe");
  started.bandwidth = must(kipp::kernels::read_bandwidth(*started.probe), "bandwidth probe");
  nlohmann::json& result = started.result;
  record_machine_and_command(result, program, argc, argv);
  result["kernels"] = kernels;
  result["threads"] = threads;
  result["bandwidth_gb_per_second"] = {{"best", started.bandwidth.best_gb_per_second},
                                       {"median", started.bandwidth.median_gb_per_second}};
  std::fprintf(stderr, "bandwidth %.1f GB/s best, %.1f median; kernels %s, %zu threads\n",
               started.bandwidth.best_gb_per_second, started.bandwidth.median_gb_per_second, kernels, threads);
  return started;
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
