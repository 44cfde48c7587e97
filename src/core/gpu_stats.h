// What the GPU a CUDA run uses is doing: its name, how busy it is and how much of its memory is
// used, read through NVML. NVML ships with the NVIDIA driver (libnvidia-ml.so.1), not with the
// CUDA toolkit, so it is opened with dlopen when a reader is opened and never linked: a machine
// without a driver gets an error naming why, never a failed start. No NVML type appears here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kipp {

// Whose memory a GpuSample's used and peak figures count.
enum class GpuMemoryScope {
  Process,  // this process's allocations (NVML's list of compute processes)
  Device,   // everything on the device: NVML does not list this process (no CUDA context yet,
            // or a container whose process ids NVML does not share)
};
const char* gpu_memory_scope_name(GpuMemoryScope scope);  // "process" or "device"

struct GpuSample {
  std::string name;                 // the device's name, e.g. "NVIDIA H100 80GB HBM3"
  double utilization_percent = 0;   // share of NVML's last sample period a kernel ran
  uint64_t memory_used_bytes = 0;   // in memory_scope
  uint64_t memory_peak_bytes = 0;   // the most memory_used_bytes seen by this reader's samples, same scope
  uint64_t memory_total_bytes = 0;  // the device's memory
  GpuMemoryScope memory_scope = GpuMemoryScope::Device;
};

// The NVML device that CUDA numbers 0 in this process, from CUDA_VISIBLE_DEVICES's first entry:
// unset or empty means NVML index 0, a number that NVML index (the two orders agree with
// CUDA_DEVICE_ORDER=PCI_BUS_ID or a single GPU), "GPU-..." a device UUID. "MIG-..." and other
// forms are an error. Exposed for tests.
struct GpuSelector {
  bool by_uuid = false;
  unsigned index = 0;
  std::string uuid;
};
Expected<GpuSelector> parse_visible_devices(const char* value);

// Samples one device. Not thread-safe: one owner samples. NVML stays initialized while any
// reader is open.
class GpuStats {
 public:
  // Opens NVML from `library` (the driver's libnvidia-ml.so.1 unless a test names another) and
  // the device of parse_visible_devices(getenv("CUDA_VISIBLE_DEVICES")).
  static Expected<GpuStats> open(std::string_view library = "libnvidia-ml.so.1");

  GpuStats(GpuStats&&) noexcept;
  GpuStats& operator=(GpuStats&&) noexcept;
  ~GpuStats();

  // Utilization and memory now; the peak covers this and earlier samples of the same scope.
  Expected<GpuSample> sample();

 private:
  struct Device;
  explicit GpuStats(std::unique_ptr<Device> device);
  std::unique_ptr<Device> device_;
};

}  // namespace kipp
