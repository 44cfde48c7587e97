// Device twins of core/half.h and the warp and block reductions the CUDA kernels share.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kipp::cuda {

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits) { return __uint_as_float(bits << 16); }

// core/half.h's f32_to_bf16: round to nearest even, NaN kept quiet.
__device__ __forceinline__ uint16_t float_to_bf16_bits(float value) {
  const uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(kFullWarp, value, offset));
  return value;
}

// The sum over the warp's 32 lanes, in every lane (a butterfly: a fixed order for a fixed lane
// assignment, not a sequential one). A lone add is never contracted, so `+` rounds as
// __fadd_rn does.
template <typename T>
__device__ __forceinline__ T warp_sum(T value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullWarp, value, offset);
  return value;
}

// The sum of every thread's `value` in a block of blockDim.x threads (a multiple of 32, at most
// 1024), returned to all of them. `shared` holds 32 doubles.
__device__ __forceinline__ double block_sum(double value, double* shared) {
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  value = warp_sum(value);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  double total = lane < warps ? shared[lane] : 0.0;
  return warp_sum(total);
}

// ref::rms_norm's scale: 1 / sqrt(mean of squares + eps), in double, then rounded to float.
__device__ __forceinline__ float inverse_rms(double sum_squares, uint32_t n, float eps) {
  return static_cast<float>(1.0 / sqrt(sum_squares / static_cast<double>(n) + static_cast<double>(eps)));
}

}  // namespace kipp::cuda
