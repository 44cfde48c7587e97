// The SwiGlu epilogue of the cuBLASLt path, one element per thread (the gate product is already in
// the output, the up product in the context's scratch).
#include "kernels/cuda/launch_status.h"
#include "kernels/cuda/matmul_device.cuh"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/matmul_plan.h"

namespace kipp::cuda {
namespace {

constexpr uint32_t kThreads = 256;

__global__ void swiglu_kernel(float* out, uint32_t out_stride, const float* __restrict__ up, uint32_t rows,
                              uint32_t outputs) {
  const uint64_t total = uint64_t{rows} * outputs;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t r = i / outputs, o = i % outputs;
    float* at = out + r * out_stride + o;
    *at = math::swiglu(*at, up[i]);
  }
}

}  // namespace

Status launch_swiglu(float* out, uint32_t out_stride, const float* up, uint32_t rows, uint32_t outputs,
                     cudaStream_t stream) {
  const uint64_t ctas = (uint64_t{rows} * outputs + kThreads - 1) / kThreads;
  const auto grid = static_cast<unsigned>(ctas < 65536 ? ctas : 65536);  // the kernel strides over the rest
  swiglu_kernel<<<grid, kThreads, 0, stream>>>(out, out_stride, up, rows, outputs);
  return last_launch_status("swiglu_kernel");
}

}  // namespace kipp::cuda
