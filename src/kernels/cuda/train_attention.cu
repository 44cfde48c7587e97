#include <cmath>

#include "kernels/cuda/train_kernels.h"

namespace kipp::cuda::train {
namespace {

constexpr uint32_t kWarp = 32;
constexpr uint32_t kWarpsPerBlock = 8;
constexpr uint32_t kLanesDims = kMaxHeadDim / kWarp;  // head dims one lane holds at most

// The sum over the warp in a butterfly: every lane gets the same value, the same on every run.
__device__ __forceinline__ float warp_sum(float value) {
  for (uint32_t offset = kWarp / 2; offset > 0; offset /= 2)
    value = add(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// Where the heads of a (row, query head) pair are; lane l holds dims l, l + 32, ...
struct Heads {
  uint32_t row, head, kv, first_row, position;
};

__device__ __forceinline__ Heads heads_of(uint64_t warp, const QkvShape& s) {
  Heads h;
  h.row = uint32_t(warp / s.q_heads);
  h.head = uint32_t(warp % s.q_heads);
  h.kv = h.head / (s.q_heads / s.kv_heads);
  h.position = h.row % s.seq_len;
  h.first_row = h.row - h.position;
  return h;
}

__device__ __forceinline__ const float* q_at(const float* qk, const QkvShape& s, uint32_t row, uint32_t head) {
  return qk + uint64_t(row) * s.qk_width() + uint64_t(head) * s.head_dim;
}
__device__ __forceinline__ const float* k_at(const float* qk, const QkvShape& s, uint32_t row, uint32_t kv) {
  return qk + uint64_t(row) * s.qk_width() + uint64_t(s.q_heads + kv) * s.head_dim;
}
__device__ __forceinline__ const float* v_at(const float* qkv, const QkvShape& s, uint32_t row, uint32_t kv) {
  return qkv + uint64_t(row) * s.qkv_width() + uint64_t(s.q_heads + s.kv_heads + kv) * s.head_dim;
}

// The warp's dot product of two heads.
__device__ __forceinline__ float head_dot(const float* a, const float* b, uint32_t dims, uint32_t lane) {
  float sum = 0;
  for (uint32_t d = lane; d < dims; d += kWarp) sum = add(sum, mul(a[d], b[d]));
  return warp_sum(sum);
}

__global__ void attention_forward_kernel(const float* qk, const float* qkv, QkvShape s, float scale, float* stats,
                                         float* out) {
  const uint32_t lane = threadIdx.x % kWarp;
  const uint64_t warp = uint64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (warp >= uint64_t(s.rows) * s.q_heads) return;
  const Heads h = heads_of(warp, s);
  const uint32_t lanes_dims = s.head_dim / kWarp;
  const float* q = q_at(qk, s, h.row, h.head);
  float o[kLanesDims] = {};
  float max = -INFINITY, sum = 0;
  for (uint32_t j = 0; j <= h.position; ++j) {
    const uint32_t key = h.first_row + j;
    const float score = mul(head_dot(q, k_at(qk, s, key, h.kv), s.head_dim, lane), scale);
    const float next_max = fmaxf(max, score);
    const float correction = fast_exp(sub(max, next_max));  // 0 on the first key (max is -inf)
    const float weight = fast_exp(sub(score, next_max));
    sum = add(mul(sum, correction), weight);
    const float* v = v_at(qkv, s, key, h.kv);
    for (uint32_t d = 0; d < lanes_dims; ++d) o[d] = add(mul(o[d], correction), mul(weight, v[lane + d * kWarp]));
    max = next_max;
  }
  const float inv = div(1.0f, sum);
  float* o_row = out + uint64_t(h.row) * s.q_heads * s.head_dim + uint64_t(h.head) * s.head_dim;
  for (uint32_t d = 0; d < lanes_dims; ++d) o_row[lane + d * kWarp] = mul(o[d], inv);
  if (lane == 0) {
    stats[warp * 2] = max;
    stats[warp * 2 + 1] = inv;
  }
}

// row_dots[row, head] = d(out) . out, the softmax backward's sum of p * dp.
__global__ void row_dots_kernel(const float* out, const float* dout, QkvShape s, float* row_dots) {
  const uint32_t lane = threadIdx.x % kWarp;
  const uint64_t warp = uint64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (warp >= uint64_t(s.rows) * s.q_heads) return;
  const uint64_t at = warp * s.head_dim;  // (row, head) rows of q_heads * head_dim are contiguous
  const float dot = head_dot(out + at, dout + at, s.head_dim, lane);
  if (lane == 0) row_dots[warp] = dot;
}

// dq of one (query row, head): sum over its keys of ds * k, ds = p * (dp - row dot) * scale.
__global__ void attention_dq_kernel(const float* qk, const float* qkv, const float* stats, const float* dout,
                                    const float* row_dots, QkvShape s, float scale, float* dqk) {
  const uint32_t lane = threadIdx.x % kWarp;
  const uint64_t warp = uint64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (warp >= uint64_t(s.rows) * s.q_heads) return;
  const Heads h = heads_of(warp, s);
  const uint32_t lanes_dims = s.head_dim / kWarp;
  const float* q = q_at(qk, s, h.row, h.head);
  const float* d_o = dout + warp * s.head_dim;
  const float max = stats[warp * 2], inv = stats[warp * 2 + 1], dot = row_dots[warp];
  float dq[kLanesDims] = {};
  for (uint32_t j = 0; j <= h.position; ++j) {
    const uint32_t key = h.first_row + j;
    const float* k = k_at(qk, s, key, h.kv);
    const float p = mul(fast_exp(sub(mul(head_dot(q, k, s.head_dim, lane), scale), max)), inv);
    const float dp = head_dot(d_o, v_at(qkv, s, key, h.kv), s.head_dim, lane);
    const float ds = mul(mul(p, sub(dp, dot)), scale);
    for (uint32_t d = 0; d < lanes_dims; ++d) dq[d] = add(dq[d], mul(ds, k[lane + d * kWarp]));
  }
  float* to = dqk + uint64_t(h.row) * s.qk_width() + uint64_t(h.head) * s.head_dim;
  for (uint32_t d = 0; d < lanes_dims; ++d) to[lane + d * kWarp] = dq[d];
}

// dk and dv of one (key row, kv head): its group's query heads in order, each over the query
// rows at or after the key in order.
__global__ void attention_dkv_kernel(const float* qk, const float* qkv, const float* stats, const float* dout,
                                     const float* row_dots, QkvShape s, float scale, float* dqk, float* dqkv) {
  const uint32_t lane = threadIdx.x % kWarp;
  const uint64_t warp = uint64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (warp >= uint64_t(s.rows) * s.kv_heads) return;
  const uint32_t key = uint32_t(warp / s.kv_heads), kv = uint32_t(warp % s.kv_heads);
  const uint32_t position = key % s.seq_len, first_row = key - position;
  const uint32_t group = s.q_heads / s.kv_heads, lanes_dims = s.head_dim / kWarp;
  const float* k = k_at(qk, s, key, kv);
  const float* v = v_at(qkv, s, key, kv);
  float dk[kLanesDims] = {}, dv[kLanesDims] = {};
  for (uint32_t head = kv * group; head < (kv + 1) * group; ++head) {
    for (uint32_t i = position; i < s.seq_len; ++i) {
      const uint32_t row = first_row + i;
      const uint64_t pair = uint64_t(row) * s.q_heads + head;
      const float* q = q_at(qk, s, row, head);
      const float* d_o = dout + pair * s.head_dim;
      const float p =
          mul(fast_exp(sub(mul(head_dot(q, k, s.head_dim, lane), scale), stats[pair * 2])), stats[pair * 2 + 1]);
      const float dp = head_dot(d_o, v, s.head_dim, lane);
      const float ds = mul(mul(p, sub(dp, row_dots[pair])), scale);
      for (uint32_t d = 0; d < lanes_dims; ++d) {
        dv[d] = add(dv[d], mul(p, d_o[lane + d * kWarp]));
        dk[d] = add(dk[d], mul(ds, q[lane + d * kWarp]));
      }
    }
  }
  float* dk_to = dqk + uint64_t(key) * s.qk_width() + uint64_t(s.q_heads + kv) * s.head_dim;
  float* dv_to = dqkv + uint64_t(key) * s.qkv_width() + uint64_t(s.q_heads + s.kv_heads + kv) * s.head_dim;
  for (uint32_t d = 0; d < lanes_dims; ++d) {
    dk_to[lane + d * kWarp] = dk[d];
    dv_to[lane + d * kWarp] = dv[d];
  }
}

bool valid(const QkvShape& s) {
  return s.head_dim % kWarp == 0 && s.head_dim > 0 && s.head_dim <= kMaxHeadDim && s.kv_heads > 0 &&
         s.q_heads % s.kv_heads == 0 && s.seq_len > 0 && s.rows % s.seq_len == 0;
}

uint32_t warp_blocks(uint64_t warps) { return uint32_t((warps + kWarpsPerBlock - 1) / kWarpsPerBlock); }

float score_scale(const QkvShape& s) { return 1.0f / std::sqrt(float(s.head_dim)); }

}  // namespace

cudaError_t attention_forward(const float* qk, const float* qkv, const QkvShape& shape, float* stats, float* out,
                              cudaStream_t stream) {
  if (!valid(shape)) return cudaErrorInvalidValue;
  const uint64_t warps = uint64_t(shape.rows) * shape.q_heads;
  if (warps == 0) return cudaSuccess;
  attention_forward_kernel<<<warp_blocks(warps), kWarpsPerBlock * kWarp, 0, stream>>>(qk, qkv, shape,
                                                                                      score_scale(shape), stats, out);
  return cudaGetLastError();
}

cudaError_t attention_backward(const float* qk, const float* qkv, const float* out, const float* stats,
                               const float* dout, const QkvShape& shape, float* row_dots, float* dqk, float* dqkv,
                               cudaStream_t stream) {
  if (!valid(shape)) return cudaErrorInvalidValue;
  const uint64_t q_warps = uint64_t(shape.rows) * shape.q_heads, kv_warps = uint64_t(shape.rows) * shape.kv_heads;
  if (q_warps == 0) return cudaSuccess;
  const float scale = score_scale(shape);
  const uint32_t threads = kWarpsPerBlock * kWarp;
  row_dots_kernel<<<warp_blocks(q_warps), threads, 0, stream>>>(out, dout, shape, row_dots);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  attention_dq_kernel<<<warp_blocks(q_warps), threads, 0, stream>>>(qk, qkv, stats, dout, row_dots, shape, scale, dqk);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  attention_dkv_kernel<<<warp_blocks(kv_warps), threads, 0, stream>>>(qk, qkv, stats, dout, row_dots, shape, scale, dqk,
                                                                      dqkv);
  return cudaGetLastError();
}

}  // namespace kipp::cuda::train
