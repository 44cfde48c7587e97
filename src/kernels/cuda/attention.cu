#include <cmath>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/forward_kernels.h"
#include "kernels/cuda/launch_status.h"

namespace kipp::cuda {
namespace {

constexpr uint32_t kWarps = 4;
constexpr uint32_t kPositions = kernels::kKvBlockPositions;  // one lane per position of a block
static_assert(kPositions == 32);

// A block's keys are kept as BF16 pairs in rows padded by one word, so the 32 lanes, each
// reading its own position's key at the same column, hit 32 different banks.
__host__ __device__ constexpr uint32_t key_row_words(uint32_t head_dim) { return head_dim / 2 + 1; }

__host__ __device__ constexpr uint64_t shared_bytes(uint32_t queries, uint32_t head_dim) {
  return uint64_t{queries} * head_dim * 2 * sizeof(float)      // queries, running results
         + uint64_t{queries} * 2 * sizeof(float)               // running max and sum
         + uint64_t{kPositions} * key_row_words(head_dim) * 4  // keys
         + uint64_t{kPositions} * head_dim * 2;                // values
}

// One thread block per (tile, kv head, split); warp w serves queries w, w + kWarps, ... of the
// tile (query qi is row qi / group, head qi % group of the kv head's group). Per K/V block of the
// split: the block is loaded into shared memory once, then each query's 32 scores (one per
// lane) update its running max, sum and results (online softmax).
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttentionArgs args) {
  extern __shared__ __align__(16) unsigned char shared[];
  const uint32_t tile = blockIdx.x, g = blockIdx.y, split = blockIdx.z;
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t hd = args.head_dim, group = args.num_heads / args.kv_heads;
  const uint32_t first_row = args.tile_first_rows[tile], tile_rows = args.tile_rows[tile];
  const uint32_t item = args.tile_items[tile];
  const uint32_t queries = tile_rows * group, max_queries = args.max_tile_rows * group;
  const KvPages& pages = args.pages;
  const uint32_t first_position = pages.positions[first_row];
  const BlockRange range = attention_split_blocks(first_position, tile_rows, args.splits, split);

  float* query = reinterpret_cast<float*>(shared);   // [max_queries][hd]
  float* result = query + size_t{max_queries} * hd;  // [max_queries][hd]
  float* state = result + size_t{max_queries} * hd;  // [max_queries][running max, sum]
  uint32_t* keys = reinterpret_cast<uint32_t*>(state + 2 * max_queries);
  uint32_t* values = keys + kPositions * key_row_words(hd);  // [kPositions][hd / 2] BF16 pairs

  for (uint32_t i = threadIdx.x; i < queries * hd; i += blockDim.x) {
    const uint32_t qi = i / hd, d = i % hd;
    const uint32_t row = first_row + qi / group, head = g * group + qi % group;
    query[i] = args.q[size_t{row} * args.q_stride + size_t{head} * hd + d];
    result[i] = 0.0f;
  }
  for (uint32_t qi = threadIdx.x; qi < queries; qi += blockDim.x) {
    state[2 * qi] = -INFINITY;
    state[2 * qi + 1] = 0.0f;
  }

  const auto* storage = reinterpret_cast<const uint16_t*>(pages.kv_bases[item]);
  const uint32_t* table = pages.tables + pages.item_table_offsets[item];
  const size_t k_offset = pages.layout.k(args.layer, g), v_offset = pages.layout.v(args.layer, g);
  const uint32_t chunks = kPositions * hd / 8;  // 16-byte loads per K (or V) block
  for (uint32_t b = range.begin; b < range.end; ++b) {
    __syncthreads();  // the previous block's K/V (and, first, the queries) are done with
    const uint16_t* block = storage + size_t{table[b]} * pages.layout.block_elements();
    const auto* k_src = reinterpret_cast<const uint4*>(block + k_offset);
    const auto* v_src = reinterpret_cast<const uint4*>(block + v_offset);
    for (uint32_t c = threadIdx.x; c < chunks; c += blockDim.x) {
      const uint32_t position = c * 8 / hd, word = (c * 8 % hd) / 2;
      const uint4 k = k_src[c], v = v_src[c];
      uint32_t* k_dst = keys + position * key_row_words(hd) + word;
      k_dst[0] = k.x, k_dst[1] = k.y, k_dst[2] = k.z, k_dst[3] = k.w;
      uint32_t* v_dst = values + position * (hd / 2) + word;
      v_dst[0] = v.x, v_dst[1] = v.y, v_dst[2] = v.z, v_dst[3] = v.w;
    }
    __syncthreads();
    const uint32_t block_first = b * kPositions;
    for (uint32_t qi = warp; qi < queries; qi += kWarps) {
      const uint32_t position = first_position + qi / group;
      if (block_first > position) continue;  // causal: nothing of this block is visible
      const uint32_t visible = min(kPositions, position - block_first + 1);
      const float* q = query + size_t{qi} * hd;
      const uint32_t* key = keys + lane * key_row_words(hd);
      float dot = 0.0f;
      for (uint32_t w = 0; w < hd / 2; ++w) {
        const uint32_t pair = key[w];
        dot = fmaf(q[2 * w], bf16_bits_to_float(pair & 0xffffu), dot);
        dot = fmaf(q[2 * w + 1], bf16_bits_to_float(pair >> 16), dot);
      }
      const float score = lane < visible ? dot * args.scale : -INFINITY;
      const float old_max = state[2 * qi], old_sum = state[2 * qi + 1];
      const float new_max = fmaxf(old_max, warp_max(score));  // finite: lane 0 is visible
      const float p = lane < visible ? expf(score - new_max) : 0.0f;
      const float rescale = expf(old_max - new_max);  // 0 on the first block
      const float block_sum = warp_sum(p);
      float* out = result + size_t{qi} * hd;
      for (uint32_t d = lane; d < hd; d += 32) {
        float value = out[d] * rescale;
        for (uint32_t j = 0; j < visible; ++j) {
          const uint32_t pair = values[j * (hd / 2) + d / 2];
          value = fmaf(__shfl_sync(kFullWarp, p, j), bf16_bits_to_float(d % 2 ? pair >> 16 : pair & 0xffffu), value);
        }
        out[d] = value;
      }
      __syncwarp();  // every lane has read the old state
      if (lane == 0) {
        state[2 * qi] = new_max;
        state[2 * qi + 1] = old_sum * rescale + block_sum;
      }
    }
  }
  __syncthreads();

  for (uint32_t i = threadIdx.x; i < queries * hd; i += blockDim.x) {
    const uint32_t qi = i / hd, d = i % hd;
    const uint32_t row = first_row + qi / group, head = g * group + qi % group;
    if (args.splits == 1) {
      args.out[size_t{row} * args.out_stride + size_t{head} * hd + d] = result[i] / state[2 * qi + 1];
    } else {
      float* partial = args.partials + ((size_t{row} * args.num_heads + head) * args.splits + split) * (hd + 2);
      partial[2 + d] = result[i];
      if (d == 0) partial[0] = state[2 * qi], partial[1] = state[2 * qi + 1];
    }
  }
}

// Merges a (row, head)'s split results: each part's sum and results rescaled to the largest
// running max (an empty part, max -inf, weighs nothing).
__global__ void combine_kernel(AttentionArgs args) {
  const uint32_t row = blockIdx.x, head = blockIdx.y, hd = args.head_dim;
  const float* parts = args.partials + (size_t{row} * args.num_heads + head) * args.splits * (hd + 2);
  float max_value = -INFINITY;
  for (uint32_t s = 0; s < args.splits; ++s) max_value = fmaxf(max_value, parts[s * (hd + 2)]);
  for (uint32_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float sum = 0.0f, value = 0.0f;
    for (uint32_t s = 0; s < args.splits; ++s) {
      const float* part = parts + s * (hd + 2);
      const float weight = part[0] == -INFINITY ? 0.0f : expf(part[0] - max_value);
      sum = fmaf(part[1], weight, sum);
      value = fmaf(part[2 + d], weight, value);
    }
    args.out[size_t{row} * args.out_stride + size_t{head} * hd + d] = value / sum;
  }
}

}  // namespace

uint64_t attention_shared_bytes(uint32_t tile_rows, uint32_t group, uint32_t head_dim) {
  return shared_bytes(tile_rows * group, head_dim);
}

Status reserve_attention_shared(uint32_t tile_rows, uint32_t group, uint32_t head_dim) {
  const uint64_t bytes = attention_shared_bytes(tile_rows, group, head_dim);
  return cuda_status(
      cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
      "setting the attention kernel's shared memory");
}

Status attention(const AttentionArgs& args, cudaStream_t stream) {
  if (args.head_dim % 32 != 0 || args.head_dim > 256)
    return make_error("the cuda backend's attention needs a head size that is a multiple of 32, at most 256");
  if (args.tiles == 0) return ok_status();
  const dim3 grid(args.tiles, args.kv_heads, args.splits);
  const uint64_t bytes = attention_shared_bytes(args.max_tile_rows, args.num_heads / args.kv_heads, args.head_dim);
  attention_kernel<<<grid, kWarps * 32, bytes, stream>>>(args);
  KIPP_RETURN_IF_ERROR(last_launch_status("attention kernel"));
  if (args.splits == 1) return ok_status();
  combine_kernel<<<dim3(args.rows, args.num_heads), args.head_dim, 0, stream>>>(args);
  return last_launch_status("attention combine kernel");
}

}  // namespace kipp::cuda
