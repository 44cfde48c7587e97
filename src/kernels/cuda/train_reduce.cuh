// Block-wide reductions of the training kernels in one fixed tree, so a sum over a block is the
// same on every run (blockDim.x a power of two; `shared` holds blockDim.x values). The result
// reaches every thread, and `shared` may be reused right after.
#pragma once

#include "kernels/cuda/train_math.h"

namespace kipp::cuda::train {

template <typename T, typename Combine>
__device__ T block_reduce(T value, T* shared, Combine combine) {
  const uint32_t t = threadIdx.x;
  shared[t] = value;
  __syncthreads();
  for (uint32_t half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) shared[t] = combine(shared[t], shared[t + half]);
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();
  return total;
}

template <typename T>
__device__ T block_sum(T value, T* shared) {
  return block_reduce(value, shared, [](T a, T b) { return a + b; });
}

__device__ inline float block_max(float value, float* shared) {
  return block_reduce(value, shared, [](float a, float b) { return fmaxf(a, b); });
}

}  // namespace kipp::cuda::train
