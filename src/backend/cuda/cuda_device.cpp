#include "backend/cuda/cuda_device.h"

#include <cuda_runtime.h>

namespace kipp {

Expected<CudaDeviceInfo> cuda_device_info() {
  CudaDeviceInfo info;
  cudaRuntimeGetVersion(&info.runtime_version);
  cudaDriverGetVersion(&info.driver_version);
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess || count == 0) {
    const std::string why = counted != cudaSuccess ? cudaGetErrorString(counted) : "no CUDA device is visible";
    return make_error("no usable NVIDIA GPU: " + why);
  }
  cudaDeviceProp properties{};
  if (const cudaError_t e = cudaGetDeviceProperties(&properties, info.index); e != cudaSuccess)
    return make_error(std::string("cannot read the GPU's properties: ") + cudaGetErrorString(e));
  info.name = properties.name;
  info.compute_major = properties.major;
  info.compute_minor = properties.minor;
  info.multiprocessors = properties.multiProcessorCount;
  size_t free_bytes = 0, total_bytes = 0;
  if (const cudaError_t e = cudaMemGetInfo(&free_bytes, &total_bytes); e != cudaSuccess)
    return make_error(std::string("cannot read the GPU's free memory: ") + cudaGetErrorString(e));
  info.free_bytes = free_bytes;
  info.total_bytes = total_bytes;
  return info;
}

}  // namespace kipp
