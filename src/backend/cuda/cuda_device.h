// What Kipp knows of the CUDA device without naming a CUDA type. "No GPU" (no device, no driver,
// or a driver older than the CUDA runtime Kipp was built with) is an error whose message says
// so: tests report SKIPPED with it, the CLI prints it.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace kipp {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  int driver_version = 0;   // as cudaDriverGetVersion reports it (13000 = 13.0)
  int runtime_version = 0;  // the runtime Kipp was built with
};

// Device 0 (or the one CUDA_VISIBLE_DEVICES makes first).
Expected<CudaDeviceInfo> cuda_device_info();

// The card's own ceilings, measured now: a large device-to-device copy (bytes read + written per
// second) and a large cuBLASLt BF16 product with FP32 accumulation (FLOP per second).
struct CudaCeilings {
  double copy_bytes_per_second = 0;
  double bf16_flops_per_second = 0;
};
Expected<CudaCeilings> measure_cuda_ceilings();

}  // namespace kipp
