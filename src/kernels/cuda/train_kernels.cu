#include "kernels/cuda/train_kernels.h"

#include <algorithm>

#include "kernels/cuda/train_reduce.cuh"

namespace kipp::cuda::train {
namespace {

constexpr uint32_t kThreads = 256;
// Grid-stride passes never need more blocks than this to fill the largest GPU.
constexpr uint64_t kMaxBlocks = 4096;

uint32_t blocks_for(uint64_t count) {
  return uint32_t(std::max<uint64_t>(1, std::min<uint64_t>(kMaxBlocks, (count + kThreads - 1) / kThreads)));
}

// ---- Optimizer ------------------------------------------------------------------------------

__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, const DecayRun* runs,
                             AdamWScalars s) {
  const DecayRun run = runs[blockIdx.y];
  const float keep = run.decays ? s.keep_decayed : 1.0f;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < run.count; i += stride) {
    const uint64_t at = run.offset + i;
    float p = params[at], mi = m[at], vi = v[at];
    adamw_element(p, mi, vi, grads[at], keep, s);
    params[at] = p;
    m[at] = mi;
    v[at] = vi;
  }
}

// Block b sums the fixed stretch [b * chunk, (b + 1) * chunk) of x.
__global__ void square_partials_kernel(const float* x, uint64_t count, uint64_t chunk, double* partials) {
  __shared__ double shared[kThreads];
  const uint64_t begin = uint64_t(blockIdx.x) * chunk;
  const uint64_t end = begin + chunk < count ? begin + chunk : count;
  double sum = 0;
  for (uint64_t i = begin + threadIdx.x; i < end; i += blockDim.x) sum += double(x[i]) * double(x[i]);
  const double total = block_sum(sum, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void sum_partials_kernel(const double* partials, uint32_t count, double* total) {
  __shared__ double shared[kThreads];
  double sum = 0;
  for (uint32_t i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  const double all = block_sum(sum, shared);
  if (threadIdx.x == 0) *total = all;
}

__global__ void scale_kernel(float* x, uint64_t count, float factor) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) x[i] = mul(x[i], factor);
}

__global__ void bf16_kernel(const float* x, uint64_t count, __nv_bfloat16* out) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = __float2bfloat16_rn(x[i]);
}

// ---- Norms ----------------------------------------------------------------------------------

__global__ void rmsnorm_forward_kernel(const float* x, const float* gain, uint32_t width, float eps, float* rstd,
                                       float* y) {
  __shared__ float shared[kThreads];
  const uint64_t base = uint64_t(blockIdx.x) * width;
  float sum = 0;
  for (uint32_t i = threadIdx.x; i < width; i += blockDim.x) sum = add(sum, mul(x[base + i], x[base + i]));
  const float s = inverse_rms(block_sum(sum, shared), width, eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = s;
  for (uint32_t i = threadIdx.x; i < width; i += blockDim.x) y[base + i] = mul(mul(x[base + i], s), gain[i]);
}

__global__ void rmsnorm_dx_kernel(const float* dy, const float* x, const float* rstd, const float* gain, uint32_t width,
                                  float* dx) {
  __shared__ float shared[kThreads];
  const uint64_t base = uint64_t(blockIdx.x) * width;
  const float s = rstd[blockIdx.x];
  float dot = 0;
  for (uint32_t i = threadIdx.x; i < width; i += blockDim.x)
    dot = add(dot, mul(mul(dy[base + i], gain[i]), mul(x[base + i], s)));
  const float mean = mul(block_sum(dot, shared), 1.0f / float(width));
  for (uint32_t i = threadIdx.x; i < width; i += blockDim.x)
    dx[base + i] = add(dx[base + i], rmsnorm_dx(dy[base + i], x[base + i], gain[i], s, mean));
}

// partials[chunk][i] = sum over the chunk's rows, in order, of dy * x * rstd (grid: chunks x
// column blocks).
__global__ void rmsnorm_gain_partials_kernel(const float* dy, const float* x, const float* rstd, uint32_t rows,
                                             uint32_t width, float* partials) {
  const uint32_t i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= width) return;
  const uint32_t begin = blockIdx.x * kGainChunkRows;
  const uint32_t end = min(rows, begin + kGainChunkRows);
  float sum = 0;
  for (uint32_t r = begin; r < end; ++r) {
    const uint64_t at = uint64_t(r) * width + i;
    sum = add(sum, mul(dy[at], mul(x[at], rstd[r])));
  }
  partials[uint64_t(blockIdx.x) * width + i] = sum;
}

// total[i] += the chunks' partials[c][i] in chunk order.
__global__ void add_partials_kernel(const float* partials, uint32_t chunks, uint32_t width, float* total) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= width) return;
  float sum = total[i];
  for (uint32_t c = 0; c < chunks; ++c) sum = add(sum, partials[uint64_t(c) * width + i]);
  total[i] = sum;
}

// One block per (row, head) of the Q and K heads; thread k handles the pair (k, k + half).
__global__ void qk_norm_rope_forward_kernel(const float* qkv, const float* q_gain, const float* k_gain, QkvShape shape,
                                            const float* rope_cos, const float* rope_sin, float eps, float* rstd,
                                            float* qk) {
  __shared__ float shared[kThreads];
  const uint32_t heads = shape.q_heads + shape.kv_heads;
  const uint32_t row = blockIdx.x / heads, j = blockIdx.x % heads;
  const uint32_t hd = shape.head_dim, half = hd / 2;
  const float* x = qkv + uint64_t(row) * shape.qkv_width() + uint64_t(j) * hd;
  float* y = qk + uint64_t(row) * shape.qk_width() + uint64_t(j) * hd;
  const float* g = j < shape.q_heads ? q_gain : k_gain;
  const uint64_t position = row % shape.seq_len;
  const float* cs = rope_cos + position * half;
  const float* sn = rope_sin + position * half;
  float sum = 0;
  for (uint32_t i = threadIdx.x; i < hd; i += blockDim.x) sum = add(sum, mul(x[i], x[i]));
  const float s = inverse_rms(block_sum(sum, shared), hd, eps);
  if (threadIdx.x == 0) rstd[uint64_t(row) * heads + j] = s;
  for (uint32_t i = threadIdx.x; i < half; i += blockDim.x) {
    const float a = mul(mul(x[i], s), g[i]);
    const float b = mul(mul(x[i + half], s), g[i + half]);
    y[i] = sub(mul(a, cs[i]), mul(b, sn[i]));
    y[i + half] = add(mul(b, cs[i]), mul(a, sn[i]));
  }
}

// The rotation's transpose: d(rotated) to dy, the gradient of the gained norm output, at column
// i of a head (i < half: the first half's formula, else the second's).
__device__ __forceinline__ float unrotate(const float* d, const float* cs, const float* sn, uint32_t i, uint32_t half) {
  if (i < half) return add(mul(d[i], cs[i]), mul(d[i + half], sn[i]));
  const uint32_t k = i - half;
  return sub(mul(d[i], cs[k]), mul(d[k], sn[k]));
}

__global__ void qk_norm_rope_dx_kernel(const float* dqk, const float* qkv, const float* rstd, const float* q_gain,
                                       const float* k_gain, QkvShape shape, const float* rope_cos,
                                       const float* rope_sin, float* dqkv) {
  __shared__ float shared[kThreads];
  const uint32_t heads = shape.q_heads + shape.kv_heads;
  const uint32_t row = blockIdx.x / heads, j = blockIdx.x % heads;
  const uint32_t hd = shape.head_dim, half = hd / 2;
  const float* d = dqk + uint64_t(row) * shape.qk_width() + uint64_t(j) * hd;
  const float* x = qkv + uint64_t(row) * shape.qkv_width() + uint64_t(j) * hd;
  float* dx = dqkv + uint64_t(row) * shape.qkv_width() + uint64_t(j) * hd;
  const float* g = j < shape.q_heads ? q_gain : k_gain;
  const uint64_t position = row % shape.seq_len;
  const float* cs = rope_cos + position * half;
  const float* sn = rope_sin + position * half;
  const float s = rstd[uint64_t(row) * heads + j];
  float dot = 0;
  for (uint32_t i = threadIdx.x; i < hd; i += blockDim.x)
    dot = add(dot, mul(mul(unrotate(d, cs, sn, i, half), g[i]), mul(x[i], s)));
  const float mean = mul(block_sum(dot, shared), 1.0f / float(hd));
  for (uint32_t i = threadIdx.x; i < hd; i += blockDim.x)
    dx[i] = rmsnorm_dx(unrotate(d, cs, sn, i, half), x[i], g[i], s, mean);
}

// partials[chunk][0, hd): the q gain's sums over the chunk's rows and query heads in order;
// [hd, 2 hd): the k gain's over the key heads. One block per chunk, one thread per column.
__global__ void qk_gain_partials_kernel(const float* dqk, const float* qkv, const float* rstd, QkvShape shape,
                                        const float* rope_cos, const float* rope_sin, float* partials) {
  const uint32_t i = threadIdx.x, hd = shape.head_dim, half = hd / 2;
  if (i >= hd) return;
  const uint32_t heads = shape.q_heads + shape.kv_heads;
  const uint32_t begin = blockIdx.x * kGainChunkRows;
  const uint32_t end = min(shape.rows, begin + kGainChunkRows);
  float q_sum = 0, k_sum = 0;
  for (uint32_t row = begin; row < end; ++row) {
    const uint64_t position = row % shape.seq_len;
    const float* cs = rope_cos + position * half;
    const float* sn = rope_sin + position * half;
    for (uint32_t j = 0; j < heads; ++j) {
      const float* d = dqk + uint64_t(row) * shape.qk_width() + uint64_t(j) * hd;
      const float x = qkv[uint64_t(row) * shape.qkv_width() + uint64_t(j) * hd + i];
      const float term = mul(unrotate(d, cs, sn, i, half), mul(x, rstd[uint64_t(row) * heads + j]));
      if (j < shape.q_heads) {
        q_sum = add(q_sum, term);
      } else {
        k_sum = add(k_sum, term);
      }
    }
  }
  partials[uint64_t(blockIdx.x) * 2 * hd + i] = q_sum;
  partials[uint64_t(blockIdx.x) * 2 * hd + hd + i] = k_sum;
}

// dq_gain and dk_gain += the chunks' partials in chunk order.
__global__ void add_qk_partials_kernel(const float* partials, uint32_t chunks, uint32_t hd, float* dq_gain,
                                       float* dk_gain) {
  const uint32_t i = threadIdx.x;
  if (i >= 2 * hd) return;
  float* total = i < hd ? dq_gain + i : dk_gain + (i - hd);
  float sum = *total;
  for (uint32_t c = 0; c < chunks; ++c) sum = add(sum, partials[uint64_t(c) * 2 * hd + i]);
  *total = sum;
}

// ---- Feed-forward and embedding -------------------------------------------------------------

__global__ void swiglu_forward_kernel(const float* gate_up, uint32_t rows, uint32_t width, float* act) {
  const uint64_t count = uint64_t(rows) * width, stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t e = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < count; e += stride) {
    const uint64_t row = e / width, i = e % width;
    const float* gate = gate_up + row * 2 * width;
    act[e] = swiglu_element(gate[i], gate[width + i]);
  }
}

__global__ void swiglu_backward_kernel(float* gate_up, float* act_grad, uint32_t rows, uint32_t width) {
  const uint64_t count = uint64_t(rows) * width, stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t e = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < count; e += stride) {
    const uint64_t row = e / width, i = e % width;
    float* gate = gate_up + row * 2 * width;
    float dgate, dup, act;
    swiglu_backward_element(gate[i], gate[width + i], act_grad[e], dgate, dup, act);
    gate[i] = dgate;
    gate[width + i] = dup;
    act_grad[e] = act;
  }
}

__global__ void embedding_forward_kernel(const float* table, const int32_t* ids, uint32_t width, float* out) {
  const float* from = table + uint64_t(ids[blockIdx.x]) * width;
  float* to = out + uint64_t(blockIdx.x) * width;
  for (uint32_t i = threadIdx.x; i < width; i += blockDim.x) to[i] = from[i];
}

// One block per (distinct id, column block): the id's rows added in their order.
__global__ void embedding_backward_kernel(const float* dx, const int32_t* ids, const uint32_t* starts,
                                          const uint32_t* rows, uint32_t width, float* dtable) {
  const uint32_t i = blockIdx.y * blockDim.x + threadIdx.x;
  if (i >= width) return;
  float* to = dtable + uint64_t(ids[blockIdx.x]) * width + i;
  float sum = *to;
  for (uint32_t k = starts[blockIdx.x]; k < starts[blockIdx.x + 1]; ++k)
    sum = add(sum, dx[uint64_t(rows[k]) * width + i]);
  *to = sum;
}

uint32_t column_blocks(uint32_t width) { return (width + kThreads - 1) / kThreads; }

}  // namespace

cudaError_t adamw_step(float* params, const float* grads, float* first_moment, float* second_moment,
                       const DecayRun* runs, uint32_t run_count, uint64_t longest_run, const AdamWScalars& scalars,
                       cudaStream_t stream) {
  if (run_count == 0 || longest_run == 0) return cudaSuccess;
  if (run_count > 65535) return cudaErrorInvalidValue;  // the grid's y extent
  const dim3 grid(blocks_for(longest_run), run_count);
  adamw_kernel<<<grid, kThreads, 0, stream>>>(params, grads, first_moment, second_moment, runs, scalars);
  return cudaGetLastError();
}

cudaError_t sum_of_squares(const float* x, uint64_t count, double* partials, double* total, cudaStream_t stream) {
  const uint64_t chunk = std::max<uint64_t>(1, (count + kNormBlocks - 1) / kNormBlocks);
  square_partials_kernel<<<kNormBlocks, kThreads, 0, stream>>>(x, count, chunk, partials);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(partials, kNormBlocks, total);
  return cudaGetLastError();
}

cudaError_t scale(float* x, uint64_t count, float factor, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  scale_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, count, factor);
  return cudaGetLastError();
}

cudaError_t round_to_bf16(const float* x, uint64_t count, __nv_bfloat16* out, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  bf16_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, count, out);
  return cudaGetLastError();
}

cudaError_t rmsnorm_forward(const float* x, const float* gain, uint32_t rows, uint32_t width, float eps, float* rstd,
                            float* y, cudaStream_t stream) {
  if (rows == 0 || width == 0) return cudaSuccess;
  rmsnorm_forward_kernel<<<rows, kThreads, 0, stream>>>(x, gain, width, eps, rstd, y);
  return cudaGetLastError();
}

cudaError_t rmsnorm_backward(const float* dy, const float* x, const float* rstd, const float* gain, uint32_t rows,
                             uint32_t width, float* partials, float* dx, float* dgain, cudaStream_t stream) {
  if (rows == 0 || width == 0) return cudaSuccess;
  rmsnorm_dx_kernel<<<rows, kThreads, 0, stream>>>(dy, x, rstd, gain, width, dx);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const uint32_t chunks = (rows + kGainChunkRows - 1) / kGainChunkRows;
  rmsnorm_gain_partials_kernel<<<dim3(chunks, column_blocks(width)), kThreads, 0, stream>>>(dy, x, rstd, rows, width,
                                                                                            partials);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  add_partials_kernel<<<column_blocks(width), kThreads, 0, stream>>>(partials, chunks, width, dgain);
  return cudaGetLastError();
}

cudaError_t qk_norm_rope_forward(const float* qkv, const float* q_gain, const float* k_gain, const QkvShape& shape,
                                 const float* rope_cos, const float* rope_sin, float eps, float* rstd, float* qk,
                                 cudaStream_t stream) {
  if (shape.head_dim % 2 != 0 || shape.head_dim > kMaxHeadDim || shape.seq_len == 0) return cudaErrorInvalidValue;
  const uint64_t blocks = uint64_t(shape.rows) * (shape.q_heads + shape.kv_heads);
  if (blocks == 0) return cudaSuccess;
  if (blocks > 0x7fffffffu) return cudaErrorInvalidValue;
  qk_norm_rope_forward_kernel<<<uint32_t(blocks), kThreads, 0, stream>>>(qkv, q_gain, k_gain, shape, rope_cos, rope_sin,
                                                                         eps, rstd, qk);
  return cudaGetLastError();
}

cudaError_t qk_norm_rope_backward(const float* dqk, const float* qkv, const float* rstd, const float* q_gain,
                                  const float* k_gain, const QkvShape& shape, const float* rope_cos,
                                  const float* rope_sin, float* partials, float* dqkv, float* dq_gain, float* dk_gain,
                                  cudaStream_t stream) {
  if (shape.head_dim % 2 != 0 || shape.head_dim > kMaxHeadDim || shape.seq_len == 0) return cudaErrorInvalidValue;
  const uint64_t blocks = uint64_t(shape.rows) * (shape.q_heads + shape.kv_heads);
  if (blocks == 0) return cudaSuccess;
  if (blocks > 0x7fffffffu) return cudaErrorInvalidValue;
  qk_norm_rope_dx_kernel<<<uint32_t(blocks), kThreads, 0, stream>>>(dqk, qkv, rstd, q_gain, k_gain, shape, rope_cos,
                                                                    rope_sin, dqkv);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const uint32_t chunks = (shape.rows + kGainChunkRows - 1) / kGainChunkRows;
  qk_gain_partials_kernel<<<chunks, kMaxHeadDim, 0, stream>>>(dqk, qkv, rstd, shape, rope_cos, rope_sin, partials);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  add_qk_partials_kernel<<<1, 2 * kMaxHeadDim, 0, stream>>>(partials, chunks, shape.head_dim, dq_gain, dk_gain);
  return cudaGetLastError();
}

cudaError_t swiglu_forward(const float* gate_up, uint32_t rows, uint32_t width, float* act, cudaStream_t stream) {
  const uint64_t count = uint64_t(rows) * width;
  if (count == 0) return cudaSuccess;
  swiglu_forward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(gate_up, rows, width, act);
  return cudaGetLastError();
}

cudaError_t swiglu_backward(float* gate_up, float* act_grad, uint32_t rows, uint32_t width, cudaStream_t stream) {
  const uint64_t count = uint64_t(rows) * width;
  if (count == 0) return cudaSuccess;
  swiglu_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(gate_up, act_grad, rows, width);
  return cudaGetLastError();
}

cudaError_t embedding_forward(const float* table, const int32_t* ids, uint32_t rows, uint32_t width, float* out,
                              cudaStream_t stream) {
  if (rows == 0 || width == 0) return cudaSuccess;
  embedding_forward_kernel<<<rows, kThreads, 0, stream>>>(table, ids, width, out);
  return cudaGetLastError();
}

cudaError_t embedding_backward(const float* dx, const int32_t* plan_ids, const uint32_t* plan_starts,
                               const uint32_t* plan_rows, uint32_t id_count, uint32_t width, float* dtable,
                               cudaStream_t stream) {
  if (id_count == 0 || width == 0) return cudaSuccess;
  embedding_backward_kernel<<<dim3(id_count, column_blocks(width)), kThreads, 0, stream>>>(dx, plan_ids, plan_starts,
                                                                                           plan_rows, width, dtable);
  return cudaGetLastError();
}

}  // namespace kipp::cuda::train
