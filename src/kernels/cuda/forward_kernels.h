// The CUDA kernels of the forward pass other than the matrix products (matmul.h): embedding
// lookup, RMS norm, Qwen3's q/k norm with RoPE and the K/V store into paged blocks, and causal
// grouped-query attention over those blocks. Each computes what kernels/ref/ops.h computes: norms
// with the sum of squares in double, the same multiplication order where a value is stored
// (K/V as BF16 round to nearest even), softmax with the maximum subtracted. Step metadata
// (tokens, positions, tiles, block tables) is read from device arrays, so a launch's arguments
// do not change from step to step and a captured graph replays with new metadata.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/matmul.h"
#include "kernels/kv_block_layout.h"

namespace kipp::cuda {

// x[r] = row tokens[r] of `table` as floats (BF16, F16, F32, Q8_0 or Q4_1), r < rows; x rows
// `table.cols` floats apart.
Status embed_rows(const DeviceMatrix& table, const uint32_t* tokens, uint32_t rows, float* x, cudaStream_t stream);

// out[r] = rms_norm(x[src(r)]) * weight over `width` floats, r < rows, where src(r) is
// row_index[r] or r when row_index is null (gathering the rows whose logits are wanted).
Status rms_norm_rows(const float* x, uint32_t x_stride, const uint32_t* row_index, uint32_t rows, const float* weight,
                     uint32_t width, float eps, float* out, uint32_t out_stride, cudaStream_t stream);

// acc[i] += x[i] for i < count.
Status add_floats(float* acc, const float* x, uint64_t count, cudaStream_t stream);

// Where a step's rows keep their K/V: row r's item is row_items[r], whose K/V storage begins at
// kv_bases[item] (a device address) and whose logical block b is physical block
// tables[item_table_offsets[item] + b].
struct KvPages {
  const uint32_t* positions = nullptr;
  const uint32_t* row_items = nullptr;
  const uint32_t* item_table_offsets = nullptr;
  const uint32_t* tables = nullptr;
  const uint64_t* kv_bases = nullptr;
  KvBlockLayout layout{};
};

// In place on `rows` rows of qkv (row r at qkv + r * qkv_stride: num_heads q heads, then
// kv_heads k heads, then kv_heads v heads, head_dim floats each): every q and k head RMS-normed
// with q_norm / k_norm and rotated by the angles of the row's position (rope: the table of
// backend/cuda/rope_table.h); then each row's k and v heads stored as BF16 at its position in
// layer `layer` of its item's blocks.
struct QkRopeStore {
  float* qkv = nullptr;
  uint32_t qkv_stride = 0;
  uint32_t rows = 0;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* rope = nullptr;
  uint32_t num_heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;  // a multiple of 64, at most 2048
  uint32_t layer = 0;
  float eps = 0;
  KvPages pages;
};
Status qk_norm_rope_store(const QkRopeStore& args, cudaStream_t stream);

// Causal grouped-query attention of a step's rows over layer `layer` of their items' K/V. Work
// comes as tiles of consecutive rows of one item (row r's query at position positions[r]
// attends to positions [0, positions[r]]); a thread block serves one (tile, kv head, split):
// the group's query heads of all the tile's rows share each K/V block it loads, and the tile's
// context is cut into `splits` parts whose partial softmax sums a combine step merges. The grid
// depends on the tile count and `splits`, never on the context length.
struct AttentionArgs {
  const float* q = nullptr;  // row r's query heads at q + r * q_stride
  uint32_t q_stride = 0;
  float* out = nullptr;  // row r's results at out + r * out_stride (num_heads * head_dim)
  uint32_t out_stride = 0;
  uint32_t rows = 0;
  uint32_t tiles = 0;
  const uint32_t* tile_first_rows = nullptr;
  const uint32_t* tile_rows = nullptr;
  const uint32_t* tile_items = nullptr;
  uint32_t max_tile_rows = 0;  // rows of the largest tile (sizes the shared memory)
  uint32_t num_heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;  // a multiple of 32, at most 256
  uint32_t layer = 0;
  uint32_t splits = 1;
  float scale = 1;
  KvPages pages;
  // splits > 1: rows * num_heads * splits partial results of head_dim + 2 floats.
  float* partials = nullptr;
};
// The K/V blocks [begin, end) that part `split` of `splits` of a tile's context covers: the tile's
// rows (`rows` consecutive positions from `first_position`) see the blocks up to their last
// position's, cut into equal runs (the last parts may be empty).
struct BlockRange {
  uint32_t begin;
  uint32_t end;
};
KIPP_HOST_DEVICE inline BlockRange attention_split_blocks(uint32_t first_position, uint32_t rows, uint32_t splits,
                                                          uint32_t split) {
  const uint32_t positions = kernels::kKvBlockPositions;
  const uint32_t blocks = (first_position + rows + positions - 1) / positions;
  const uint32_t per_split = (blocks + splits - 1) / splits;
  const uint32_t begin = split * per_split < blocks ? split * per_split : blocks;
  return {begin, blocks - begin < per_split ? blocks : begin + per_split};
}

// Shared memory one attention thread block takes for tiles of `tile_rows` rows.
uint64_t attention_shared_bytes(uint32_t tile_rows, uint32_t group, uint32_t head_dim);
// Allows attention thread blocks the shared memory of tiles up to `tile_rows` rows; once, before
// any attention() and outside graph capture.
Status reserve_attention_shared(uint32_t tile_rows, uint32_t group, uint32_t head_dim);
Status attention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace kipp::cuda
