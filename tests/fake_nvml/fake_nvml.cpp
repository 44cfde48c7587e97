// A stand-in for libnvidia-ml.so.1 with the entry points core/gpu_stats.cpp resolves, reporting
// what the test put into its state (fake_nvml.h), so the reader's NVML calls run without a GPU.
#include "fake_nvml.h"

#include <cstdio>

namespace {

kipp::test::FakeNvmlState g_state;
int g_device = 0;  // the handle's target

struct Memory {
  unsigned long long total, free, used;
};
struct Utilization {
  unsigned int gpu, memory;
};
struct ProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};

}  // namespace

extern "C" {

kipp::test::FakeNvmlState* kipp_fake_nvml_state() { return &g_state; }

int nvmlInit_v2() {
  ++g_state.init_calls;
  return g_state.init_result;
}
int nvmlShutdown() {
  ++g_state.shutdown_calls;
  return 0;
}
const char* nvmlErrorString(int code) { return code == 9 ? "Driver Not Loaded" : "Unknown Error"; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  g_state.index_asked = static_cast<int>(index);
  *device = &g_device;
  return 0;
}
int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  std::snprintf(g_state.uuid_asked, sizeof g_state.uuid_asked, "%s", uuid);
  *device = &g_device;
  return 0;
}
int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  if (device != &g_device || length < 16) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  std::snprintf(name, length, "%s", "Fake GPU 80GB");
  return 0;
}
int nvmlDeviceGetUtilizationRates(void* device, Utilization* utilization) {
  if (device != &g_device) return 2;
  *utilization = {g_state.utilization, 0};
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  if (device != &g_device) return 2;
  *memory = {g_state.total_bytes, g_state.total_bytes - g_state.used_bytes, g_state.used_bytes};
  return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count, ProcessInfo* infos) {
  if (device != &g_device) return 2;
  ++g_state.process_calls;
  if (*count < g_state.process_count) {
    *count = g_state.process_count;
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  for (unsigned i = 0; i < g_state.process_count; ++i) {
    infos[i] = {g_state.processes[i].pid, g_state.processes[i].used_bytes, 0, 0};
  }
  *count = g_state.process_count;
  return 0;
}

}  // extern "C"
