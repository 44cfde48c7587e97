// The facts about this machine and invocation a benchmark result is recorded with, so a number
// in bench/results/ can be told apart from one taken elsewhere. Linux: /proc.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace kipp {

struct MachineInfo {
  std::string cpu_model;  // /proc/cpuinfo "model name", or "unknown"
  // "family F model M stepping S" from /proc/cpuinfo, empty when unknown: a VM often shows only
  // a vendor's name ("AMD EPYC"), and the family tells one core generation from the next.
  std::string cpu_signature;
  unsigned hardware_threads = 0;
  uint64_t memory_bytes = 0;  // MemTotal; 0 when unknown
  // The instruction-set flags the kernels care about, in a fixed order, and whether present.
  std::vector<std::pair<std::string, bool>> flags;
};

MachineInfo read_machine_info();

// The JSON object benchmark results record the machine with.
nlohmann::ordered_json machine_json(const MachineInfo& info);

// This process's command line from /proc/self/cmdline, arguments shell-quoted where needed.
std::string read_command_line();

// Resets this process's peak resident size (VmHWM) to its current size, so that a peak read
// later leaves out what was allocated and freed before (the bandwidth probe's buffer). Linux
// 4.0+: writes "5" to /proc/self/clear_refs; false where that is not possible.
bool reset_peak_rss();

}  // namespace kipp
