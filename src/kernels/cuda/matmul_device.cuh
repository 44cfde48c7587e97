// Device helpers the product kernels share: the epilogue of one output and warp sums.
#pragma once

#include "kernels/cuda/matmul.h"
#include "kernels/cuda/matmul_math.h"

namespace kipp::cuda {

inline constexpr unsigned kFullWarp = 0xffffffffu;

// What `epilogue` does with one result `value` (and, for SwiGlu, the up projection's `up`).
__device__ __forceinline__ void finish(Epilogue epilogue, float* out, float value, float up) {
  switch (epilogue) {
    case Epilogue::Store: *out = value; break;
    case Epilogue::Accumulate: *out = math::add(*out, value); break;
    case Epilogue::SwiGlu: *out = math::swiglu(value, up); break;
  }
}

// The sum over the warp's 32 lanes, in every lane (a butterfly: a fixed order for a fixed lane
// assignment, not the reference's sequential one).
__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value = math::add(value, __shfl_xor_sync(kFullWarp, value, offset));
  return value;
}

}  // namespace kipp::cuda
