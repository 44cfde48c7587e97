// Q8_0 / affine4 products of many rows: a CTA computes a tile of 64 outputs x 64 input rows,
// walking the blocks in chunks of 4. Each chunk's weight blocks are decoded once into shared
// memory (words ready for DP4A, scales as FP32) next to the input rows' codes, and each thread
// then sums 4 outputs x 4 rows. Every output adds its block terms one after another in block
// order, the reference's own sequence, so this path matches kernels::ref::matmul bit for bit.
#include "format/quant.h"
#include "kernels/cuda/launch_status.h"
#include "kernels/cuda/matmul_device.cuh"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/matmul_plan.h"

namespace kipp::cuda {
namespace {

constexpr uint32_t kTileOutputs = 64;
constexpr uint32_t kTileRows = 64;
constexpr uint32_t kChunk = 4;  // blocks per shared-memory round
constexpr uint32_t kSide = 16;  // threads per tile side: 16 x 16 threads, 4 x 4 results each
constexpr uint32_t kThreads = kSide * kSide;
// Words of one tile line (kChunk blocks of 8 words) plus 4 of padding, so that 16-byte reads of
// 8 consecutive lines start in different banks.
constexpr uint32_t kLineWords = kChunk * 8 + 4;
static_assert(kTileOutputs * kChunk == kThreads && kTileRows * kChunk == kThreads, "one block per thread per round");

struct TileMatrix {
  int32_t words[kTileOutputs][kLineWords];
  float scale[kTileOutputs][kChunk];
  float min[kTileOutputs][kChunk];
};

struct TileInput {
  int32_t words[kTileRows][kLineWords];
  float scale[kTileRows][kChunk];
  float scaled_sum[kTileRows][kChunk];
};

template <GgmlType Type>
__device__ __forceinline__ void load_weights(TileMatrix& tile, const uint8_t* w, uint64_t row_bytes, uint32_t outputs,
                                             uint32_t o0, uint32_t block, uint32_t line, uint32_t slot) {
  constexpr uint64_t kBlockBytes = Type == GgmlType::Q8_0 ? sizeof(BlockQ8_0) : sizeof(BlockAffine4);
  math::WeightBlock b{};
  if (o0 + line < outputs) {
    const uint8_t* at = w + (o0 + line) * row_bytes + block * kBlockBytes;
    if constexpr (Type == GgmlType::Q8_0)
      b = math::load_q8_0(at);
    else
      b = math::load_affine4(at);
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) tile.words[line][slot * 8 + k] = b.words[k];
  tile.scale[line][slot] = b.scale;
  tile.min[line][slot] = b.min;
}

__device__ __forceinline__ void load_inputs(TileInput& tile, const DeviceInput& in, uint32_t r0, uint32_t block,
                                            uint32_t line, uint32_t slot) {
  int4 low{}, high{};
  float scale = 0, scaled_sum = 0;
  if (r0 + line < in.rows) {
    const uint64_t at = uint64_t{r0 + line} * (in.cols / math::kBlock) + block;
    const auto* codes = reinterpret_cast<const int4*>(in.q8 + at * math::kBlock);
    low = codes[0];
    high = codes[1];
    scale = in.q8_scale[at];
    scaled_sum = in.q8_scaled_sum[at];
  }
  *reinterpret_cast<int4*>(&tile.words[line][slot * 8]) = low;
  *reinterpret_cast<int4*>(&tile.words[line][slot * 8 + 4]) = high;
  tile.scale[line][slot] = scale;
  tile.scaled_sum[line][slot] = scaled_sum;
}

// Weight block `slot` of tile line `line`, as the shared tile holds it.
__device__ __forceinline__ math::WeightBlock tile_block(const TileMatrix& tile, uint32_t line, uint32_t slot) {
  math::WeightBlock b;
  const int4 low = *reinterpret_cast<const int4*>(&tile.words[line][slot * 8]);
  const int4 high = *reinterpret_cast<const int4*>(&tile.words[line][slot * 8 + 4]);
  b.words[0] = low.x, b.words[1] = low.y, b.words[2] = low.z, b.words[3] = low.w;
  b.words[4] = high.x, b.words[5] = high.y, b.words[6] = high.z, b.words[7] = high.w;
  b.scale = tile.scale[line][slot];
  b.min = tile.min[line][slot];
  return b;
}

// The term of weight block `w` with input row r's block `slot`, whose codes are `input_words`.
template <GgmlType Type>
__device__ __forceinline__ float tile_term(const math::WeightBlock& w, const TileInput& x, uint32_t r, uint32_t slot,
                                           const int32_t* input_words) {
  const int32_t dot = math::block_dot(w, input_words);
  if constexpr (Type == GgmlType::Q8_0)
    return math::q8_0_term(w.scale, x.scale[r][slot], dot);
  else
    return math::affine4_term(w.scale, w.min, x.scale[r][slot], dot, x.scaled_sum[r][slot]);
}

template <GgmlType Type, bool Pair>
__global__ void __launch_bounds__(kThreads)
    quant_tiled_kernel(const uint8_t* __restrict__ w, const uint8_t* __restrict__ up, uint64_t row_bytes,
                       uint32_t outputs, DeviceInput in, float* __restrict__ out, uint32_t out_stride,
                       Epilogue epilogue) {
  __shared__ __align__(16) TileMatrix weight_tiles[Pair ? 2 : 1];  // w, then up for SwiGlu
  __shared__ __align__(16) TileInput x_tile;
  TileMatrix& w_tile = weight_tiles[0];
  const uint32_t o0 = blockIdx.x * kTileOutputs, r0 = blockIdx.y * kTileRows;
  const uint32_t tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;  // rows tx + 16 j, outputs ty + 16 i
  const uint32_t line = threadIdx.x / kChunk, slot = threadIdx.x % kChunk;
  const uint32_t blocks = in.cols / math::kBlock;
  float sums[4][4] = {};
  float up_sums[4][4] = {};
  for (uint32_t b0 = 0; b0 < blocks; b0 += kChunk) {
    const uint32_t chunk = blocks - b0 < kChunk ? blocks - b0 : kChunk;
    if (slot < chunk) {
      load_weights<Type>(w_tile, w, row_bytes, outputs, o0, b0 + slot, line, slot);
      if constexpr (Pair)
        load_weights<Type>(weight_tiles[Pair ? 1 : 0], up, row_bytes, outputs, o0, b0 + slot, line, slot);
      load_inputs(x_tile, in, r0, b0 + slot, line, slot);
    }
    __syncthreads();
    for (uint32_t slot_k = 0; slot_k < chunk; ++slot_k) {
      int32_t input_words[4][8];
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int k = 0; k < 8; ++k) input_words[j][k] = x_tile.words[tx + kSide * j][slot_k * 8 + k];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t o = ty + kSide * i;
        const math::WeightBlock weights = tile_block(w_tile, o, slot_k);
        math::WeightBlock up_weights{};
        if constexpr (Pair) up_weights = tile_block(weight_tiles[Pair ? 1 : 0], o, slot_k);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t r = tx + kSide * j;
          sums[i][j] = math::add(sums[i][j], tile_term<Type>(weights, x_tile, r, slot_k, input_words[j]));
          if constexpr (Pair)
            up_sums[i][j] = math::add(up_sums[i][j], tile_term<Type>(up_weights, x_tile, r, slot_k, input_words[j]));
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t o = o0 + ty + kSide * i, r = r0 + tx + kSide * j;
      if (o < outputs && r < in.rows) finish(epilogue, out + uint64_t{r} * out_stride + o, sums[i][j], up_sums[i][j]);
    }
}

template <GgmlType Type>
Status launch_type(const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, float* out,
                   uint32_t out_stride, Epilogue epilogue, cudaStream_t stream) {
  const dim3 grid((w.rows + kTileOutputs - 1) / kTileOutputs, (in.rows + kTileRows - 1) / kTileRows);
  if (up != nullptr)
    quant_tiled_kernel<Type, true>
        <<<grid, kThreads, 0, stream>>>(w.data, up->data, w.row_bytes, w.rows, in, out, out_stride, epilogue);
  else
    quant_tiled_kernel<Type, false>
        <<<grid, kThreads, 0, stream>>>(w.data, nullptr, w.row_bytes, w.rows, in, out, out_stride, epilogue);
  return last_launch_status("quant_tiled_kernel");
}

}  // namespace

Status launch_quant_tiled(const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, float* out,
                          uint32_t out_stride, Epilogue epilogue, cudaStream_t stream) {
  if ((in.rows + kTileRows - 1) / kTileRows > 65535)
    return make_error("quant_tiled_kernel: " + std::to_string(in.rows) + " input rows exceed one launch");
  if (w.type == GgmlType::Q8_0) return launch_type<GgmlType::Q8_0>(w, up, in, out, out_stride, epilogue, stream);
  return launch_type<GgmlType::Q4_1>(w, up, in, out, out_stride, epilogue, stream);
}

}  // namespace kipp::cuda
