// Input preparation on the device, value for value kernels::ref::prepare_rows: BF16 by the bit
// rounding of core/half.h, Q8 one warp per block of 32 (the block's maximum and code sum are
// reduced across the warp; max and integer sums are exact in any order).
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/matmul_math.h"

namespace kipp::cuda {
namespace {

constexpr uint32_t kThreads = 256;
constexpr uint64_t kMaxGrid = 65536;  // enough CTAs to fill any GPU; the kernels stride over the rest

__global__ void prepare_bf16_kernel(const float* x, uint32_t x_stride, uint16_t* out, uint32_t rows, uint32_t cols) {
  const uint64_t total = uint64_t{rows} * cols;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t r = i / cols, c = i % cols;
    out[i] = math::float_to_bf16(x[r * x_stride + c]);
  }
}

__global__ void prepare_q8_kernel(const float* x, uint32_t x_stride, DeviceInput in) {
  const uint32_t row_blocks = in.cols / math::kBlock;
  const uint64_t total = uint64_t{in.rows} * row_blocks;
  const uint32_t lane = threadIdx.x % math::kBlock;
  const uint64_t warps = uint64_t{gridDim.x} * (blockDim.x / math::kBlock);
  // `block` is the same for the whole warp, so every shuffle below has all 32 lanes.
  for (uint64_t block = (uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / math::kBlock; block < total;
       block += warps) {
    const uint64_t r = block / row_blocks, b = block % row_blocks;
    const float value = x[r * x_stride + b * math::kBlock + lane];
    const float largest = warp_max(math::max_magnitude(0.0f, value));
    const int8_t code = math::q8_code(value, math::q8_inverse(largest));
    in.q8[block * math::kBlock + lane] = code;  // row r's codes start at r * cols = r * row_blocks * 32
    const int32_t sum = warp_sum(int32_t{code});
    if (lane == 0) {
      const float scale = math::q8_scale(largest);
      in.q8_scale[block] = scale;
      in.q8_scaled_sum[block] = math::q8_scaled_sum(scale, sum);
    }
  }
}

unsigned grid_for(uint64_t threads) {
  const uint64_t ctas = (threads + kThreads - 1) / kThreads;
  return static_cast<unsigned>(ctas < kMaxGrid ? ctas : kMaxGrid);
}

}  // namespace

// Launch errors (none are expected for valid views) stay pending for the next product, whose
// matmul() reports them as a failure before its own launch.
void prepare_input(const float* x, uint32_t x_stride, const DeviceInput& in, cudaStream_t stream) {
  const uint64_t values = uint64_t{in.rows} * in.cols;
  if (values == 0) return;
  if (in.format == kernels::InputFormat::BF16)
    prepare_bf16_kernel<<<grid_for(values), kThreads, 0, stream>>>(x, x_stride, in.bf16, in.rows, in.cols);
  else if (in.format == kernels::InputFormat::Q8)
    prepare_q8_kernel<<<grid_for(values), kThreads, 0, stream>>>(x, x_stride, in);
}

}  // namespace kipp::cuda
