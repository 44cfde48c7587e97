// The state of the stand-in for the driver's NVML library (fake_nvml.cpp) that the unit tests
// load through GpuStats::open: the tests set what its functions report and read what they were
// asked.
#pragma once

#include <cstdint>

namespace kipp::test {

struct FakeNvmlProcess {
  unsigned int pid;
  unsigned long long used_bytes;
};

struct FakeNvmlState {
  int init_result = 0;  // an NVML return code; nonzero fails nvmlInit_v2
  unsigned int utilization = 0;
  unsigned long long total_bytes = 0;
  unsigned long long used_bytes = 0;
  unsigned int process_count = 0;
  FakeNvmlProcess processes[128] = {};
  // What the reader asked for.
  int index_asked = -1;
  char uuid_asked[96] = {};
  int process_calls = 0;
  int init_calls = 0;
  int shutdown_calls = 0;
};

}  // namespace kipp::test

// Exported by the fake library; reached with dlsym.
extern "C" kipp::test::FakeNvmlState* kipp_fake_nvml_state();
