#include <algorithm>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/forward_kernels.h"
#include "kernels/cuda/launch_status.h"

namespace kipp::cuda {
namespace {

constexpr uint32_t kThreads = 256;

__global__ void rms_norm_kernel(const float* x, uint32_t x_stride, const uint32_t* row_index, const float* weight,
                                uint32_t width, float eps, float* out, uint32_t out_stride) {
  __shared__ double partial[32];
  const uint32_t source = row_index != nullptr ? row_index[blockIdx.x] : blockIdx.x;
  const float* in = x + size_t{source} * x_stride;
  double sum = 0;
  for (uint32_t i = threadIdx.x; i < width; i += blockDim.x) sum += static_cast<double>(in[i]) * in[i];
  const float scale = inverse_rms(block_sum(sum, partial), width, eps);
  float* result = out + size_t{blockIdx.x} * out_stride;
  for (uint32_t i = threadIdx.x; i < width; i += blockDim.x) result[i] = __fmul_rn(__fmul_rn(in[i], scale), weight[i]);
}

__global__ void add_kernel(float* acc, const float* x, uint64_t count) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count; i += uint64_t{gridDim.x} * blockDim.x)
    acc[i] = __fadd_rn(acc[i], x[i]);
}

}  // namespace

Status rms_norm_rows(const float* x, uint32_t x_stride, const uint32_t* row_index, uint32_t rows, const float* weight,
                     uint32_t width, float eps, float* out, uint32_t out_stride, cudaStream_t stream) {
  if (rows == 0) return ok_status();
  rms_norm_kernel<<<rows, kThreads, 0, stream>>>(x, x_stride, row_index, weight, width, eps, out, out_stride);
  return last_launch_status("rms norm kernel");
}

Status add_floats(float* acc, const float* x, uint64_t count, cudaStream_t stream) {
  if (count == 0) return ok_status();
  const uint64_t blocks = std::min<uint64_t>((count + kThreads - 1) / kThreads, 65535);
  add_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(acc, x, count);
  return last_launch_status("add kernel");
}

}  // namespace kipp::cuda
