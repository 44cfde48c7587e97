// The epilogue of one output, shared by the product kernels (warp sums: device_math.cuh).
#pragma once

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/matmul_math.h"

namespace kipp::cuda {

// What `epilogue` does with one result `value` (and, for SwiGlu, the up projection's `up`).
__device__ __forceinline__ void finish(Epilogue epilogue, float* out, float value, float up) {
  switch (epilogue) {
    case Epilogue::Store: *out = value; break;
    case Epilogue::Accumulate: *out = math::add(*out, value); break;
    case Epilogue::SwiGlu: *out = math::swiglu(value, up); break;
  }
}

}  // namespace kipp::cuda
