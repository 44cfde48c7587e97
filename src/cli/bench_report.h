// What `kipp bench` measured, the figures derived from it against the machine's limits, and
// the two ways it is shown: a table for people and a JSON document (units in the key names)
// for bench/results/.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "cli/bench_runs.h"
#include "core/machine_info.h"
#include "core/process_stats.h"
#include "kernels/cpu/machine_probe.h"
#include "runtime/engine.h"

namespace kipp::cli {

// The GPU of a cuda run: its facts, what the backend held right after loading, and the card's
// ceilings measured in the same run (decode is set against the copy, prefill against the BF16
// product, in place of the host probes).
struct BenchDevice {
  CudaDeviceInfo info;
  BackendMemory memory_after_load;
  CudaCeilings ceilings;
};

// Everything measured (the derived figures are computed when shown).
struct BenchResult {
  MachineInfo machine;
  std::string command;
  uint32_t threads = 0;
  uint32_t max_step_tokens = 0;
  std::optional<kernels::BandwidthResult> bandwidth;
  std::vector<kernels::PeakRate> peaks;
  bool peak_rss_reset = false;
  std::vector<PrefillRun> prefills;
  std::optional<BenchDevice> device;
  DecodeRun decode;
  std::vector<BatchRun> batches;
  ProcessMemory memory;
};

nlohmann::ordered_json bench_json(const Engine& engine, const BenchResult& result);
void print_bench_table(const Engine& engine, const BenchResult& result);

}  // namespace kipp::cli
