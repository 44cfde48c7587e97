// The CUDA device probe of a Kipp built without nvcc: every question about the GPU answers that
// the cuda backend is not built in, so callers (the backend factory, kipp bench) need no
// conditional code of their own.
#ifndef KIPP_HAVE_CUDA

#include "backend/cuda/cuda_device.h"

namespace kipp {
namespace {

Error not_built() {
  return make_error(
      "the cuda backend is not built into this Kipp: nvcc was not found when it was built (see docs/GPU.md)");
}

}  // namespace

Expected<CudaDeviceInfo> cuda_device_info() { return not_built(); }

Expected<CudaCeilings> measure_cuda_ceilings() { return not_built(); }

}  // namespace kipp

#endif
