// BF16 products of few rows: one warp per output row streams that weight row once in 16-byte
// vectors (8 values per lane per step) and multiplies it with every input row, one FP32 sum
// per row in registers, reduced across the warp at the end. The product of two BF16 values is
// exact in FP32, so the fused multiply-add rounds exactly as a multiply then an add would.
#include "kernels/cuda/launch_status.h"
#include "kernels/cuda/matmul_device.cuh"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/matmul_plan.h"

namespace kipp::cuda {
namespace {

constexpr uint32_t kWarps = 8;  // output rows per CTA
constexpr uint32_t kValuesPerVector = 8;

// acc + the dot of 8 BF16 weights and 8 BF16 inputs, each 32-bit word two values (low half
// first).
__device__ __forceinline__ float dot8(const uint4& w, const uint4& x, float acc) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w};
  const uint32_t xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    acc = fmaf(__uint_as_float(wv[k] << 16), __uint_as_float(xv[k] << 16), acc);
    acc = fmaf(__uint_as_float(wv[k] & 0xffff0000u), __uint_as_float(xv[k] & 0xffff0000u), acc);
  }
  return acc;
}

// Rows is the number of input rows (1..kDecodeRows); Pair reads the up projection too (SwiGlu).
template <uint32_t Rows, bool Pair>
__global__ void __launch_bounds__(kWarps * 32)
    bf16_decode_kernel(const uint8_t* __restrict__ w, const uint8_t* __restrict__ up, uint64_t row_bytes,
                       uint32_t outputs, uint32_t cols, const uint16_t* __restrict__ x, float* __restrict__ out,
                       uint32_t out_stride, Epilogue epilogue) {
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t o = blockIdx.x * kWarps + threadIdx.x / 32;
  if (o >= outputs) return;  // the whole warp leaves together
  const auto* w_row = reinterpret_cast<const uint4*>(w + o * row_bytes);
  const auto* up_row = Pair ? reinterpret_cast<const uint4*>(up + o * row_bytes) : nullptr;
  const uint32_t vectors = cols / kValuesPerVector;
  float sums[Rows] = {};
  float up_sums[Rows] = {};
#pragma unroll 4
  for (uint32_t v = lane; v < vectors; v += 32) {
    const uint4 weights = __ldg(w_row + v);
    uint4 up_weights{};
    if constexpr (Pair) up_weights = __ldg(up_row + v);
#pragma unroll
    for (uint32_t r = 0; r < Rows; ++r) {
      const uint4 inputs = __ldg(reinterpret_cast<const uint4*>(x + uint64_t{r} * cols) + v);
      sums[r] = dot8(weights, inputs, sums[r]);
      if constexpr (Pair) up_sums[r] = dot8(up_weights, inputs, up_sums[r]);
    }
  }
#pragma unroll
  for (uint32_t r = 0; r < Rows; ++r) {
    const float sum = warp_sum(sums[r]);
    const float up_sum = Pair ? warp_sum(up_sums[r]) : 0.0f;
    if (lane == r) finish(epilogue, out + uint64_t{r} * out_stride + o, sum, up_sum);
  }
}

template <uint32_t Rows>
Status launch_rows(const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, float* out,
                   uint32_t out_stride, Epilogue epilogue, cudaStream_t stream) {
  if constexpr (Rows > 1) {
    if (in.rows < Rows) return launch_rows<Rows - 1>(w, up, in, out, out_stride, epilogue, stream);
  }
  const dim3 grid((w.rows + kWarps - 1) / kWarps);
  if (up != nullptr)
    bf16_decode_kernel<Rows, true><<<grid, kWarps * 32, 0, stream>>>(w.data, up->data, w.row_bytes, w.rows, w.cols,
                                                                     in.bf16, out, out_stride, epilogue);
  else
    bf16_decode_kernel<Rows, false><<<grid, kWarps * 32, 0, stream>>>(w.data, nullptr, w.row_bytes, w.rows, w.cols,
                                                                      in.bf16, out, out_stride, epilogue);
  return last_launch_status("bf16_decode_kernel");
}

}  // namespace

Status launch_bf16_decode(const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, float* out,
                          uint32_t out_stride, Epilogue epilogue, cudaStream_t stream) {
  static_assert(kDecodeRows <= 32, "one lane writes each row's result");
  return launch_rows<kDecodeRows>(w, up, in, out, out_stride, epilogue, stream);
}

}  // namespace kipp::cuda
