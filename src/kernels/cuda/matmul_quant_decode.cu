// Q8_0 / affine4 products of few rows: one warp per output row, lane b taking the row's blocks
// b, b + 32, ... (each weight block read once for every input row), per block the exact DP4A dot
// and then the reference's float step (matmul_math.h). Each lane adds its blocks in order and
// the warp adds the 32 lane sums by a butterfly, so only the order of the block sums differs
// from kernels::ref::matmul.
#include "format/quant.h"
#include "kernels/cuda/launch_status.h"
#include "kernels/cuda/matmul_device.cuh"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/matmul_plan.h"

namespace kipp::cuda {
namespace {

constexpr uint32_t kWarps = 8;  // output rows per CTA

template <GgmlType Type>
__device__ __forceinline__ math::WeightBlock load_block(const uint8_t* block) {
  if constexpr (Type == GgmlType::Q8_0)
    return math::load_q8_0(block);
  else
    return math::load_affine4(block);
}

// One block's term for input row r (codes 16-byte aligned: rows of whole 32-code blocks over
// 256-byte aligned storage).
template <GgmlType Type>
__device__ __forceinline__ float block_term(const math::WeightBlock& w, const DeviceInput& in, uint64_t block) {
  const auto* codes = reinterpret_cast<const int4*>(in.q8 + block * math::kBlock);
  const int4 low = __ldg(codes), high = __ldg(codes + 1);
  const int32_t words[8] = {low.x, low.y, low.z, low.w, high.x, high.y, high.z, high.w};
  const int32_t dot = math::block_dot(w, words);
  if constexpr (Type == GgmlType::Q8_0)
    return math::q8_0_term(w.scale, __ldg(in.q8_scale + block), dot);
  else
    return math::affine4_term(w.scale, w.min, __ldg(in.q8_scale + block), dot, __ldg(in.q8_scaled_sum + block));
}

template <GgmlType Type, uint32_t Rows, bool Pair>
__global__ void __launch_bounds__(kWarps * 32)
    quant_decode_kernel(const uint8_t* __restrict__ w, const uint8_t* __restrict__ up, uint64_t row_bytes,
                        uint32_t outputs, uint32_t cols, DeviceInput in, float* __restrict__ out, uint32_t out_stride,
                        Epilogue epilogue) {
  constexpr uint64_t kBlockBytes = Type == GgmlType::Q8_0 ? sizeof(BlockQ8_0) : sizeof(BlockAffine4);
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t o = blockIdx.x * kWarps + threadIdx.x / 32;
  if (o >= outputs) return;  // the whole warp leaves together
  const uint8_t* w_row = w + o * row_bytes;
  const uint8_t* up_row = Pair ? up + o * row_bytes : nullptr;
  const uint32_t blocks = cols / math::kBlock;
  float sums[Rows] = {};
  float up_sums[Rows] = {};
  for (uint32_t b = lane; b < blocks; b += 32) {
    const math::WeightBlock weights = load_block<Type>(w_row + b * kBlockBytes);
    math::WeightBlock up_weights{};
    if constexpr (Pair) up_weights = load_block<Type>(up_row + b * kBlockBytes);
#pragma unroll
    for (uint32_t r = 0; r < Rows; ++r) {
      const uint64_t block = uint64_t{r} * blocks + b;
      sums[r] = math::add(sums[r], block_term<Type>(weights, in, block));
      if constexpr (Pair) up_sums[r] = math::add(up_sums[r], block_term<Type>(up_weights, in, block));
    }
  }
#pragma unroll
  for (uint32_t r = 0; r < Rows; ++r) {
    const float sum = warp_sum(sums[r]);
    const float up_sum = Pair ? warp_sum(up_sums[r]) : 0.0f;
    if (lane == r) finish(epilogue, out + uint64_t{r} * out_stride + o, sum, up_sum);
  }
}

template <GgmlType Type, uint32_t Rows>
Status launch_rows(const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, float* out,
                   uint32_t out_stride, Epilogue epilogue, cudaStream_t stream) {
  if constexpr (Rows > 1) {
    if (in.rows < Rows) return launch_rows<Type, Rows - 1>(w, up, in, out, out_stride, epilogue, stream);
  }
  const dim3 grid((w.rows + kWarps - 1) / kWarps);
  if (up != nullptr)
    quant_decode_kernel<Type, Rows, true><<<grid, kWarps * 32, 0, stream>>>(w.data, up->data, w.row_bytes, w.rows,
                                                                            w.cols, in, out, out_stride, epilogue);
  else
    quant_decode_kernel<Type, Rows, false>
        <<<grid, kWarps * 32, 0, stream>>>(w.data, nullptr, w.row_bytes, w.rows, w.cols, in, out, out_stride, epilogue);
  return last_launch_status("quant_decode_kernel");
}

}  // namespace

Status launch_quant_decode(const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, float* out,
                           uint32_t out_stride, Epilogue epilogue, cudaStream_t stream) {
  static_assert(kDecodeRows <= 32, "one lane writes each row's result");
  if (w.type == GgmlType::Q8_0)
    return launch_rows<GgmlType::Q8_0, kDecodeRows>(w, up, in, out, out_stride, epilogue, stream);
  return launch_rows<GgmlType::Q4_1, kDecodeRows>(w, up, in, out, out_stride, epilogue, stream);
}

}  // namespace kipp::cuda
