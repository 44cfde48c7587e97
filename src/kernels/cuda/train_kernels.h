// The non-product passes of the GPU training step, each a launcher on a stream that returns the
// launch's error. Every buffer is device memory, FP32 unless named otherwise, row-major. No pass
// uses float atomics: every sum is split the same way on every run and added in a fixed order,
// so the same inputs give bitwise the same outputs on the same GPU. The per-element arithmetic
// is train_math.h's, shared with the CPU unit tests.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/train_math.h"

namespace kipp::cuda::train {

// ---- Optimizer and gradient norm ------------------------------------------------------------

// A stretch of the flat parameter buffer whose tensors all take weight decay, or all do not.
struct DecayRun {
  uint64_t offset = 0;
  uint64_t count = 0;
  uint32_t decays = 0;
};

// One AdamW update of every element of `runs` (device array of run_count, longest_run the
// largest count): params, first and second moments in place, from grads.
cudaError_t adamw_step(float* params, const float* grads, float* first_moment, float* second_moment,
                       const DecayRun* runs, uint32_t run_count, uint64_t longest_run, const AdamWScalars& scalars,
                       cudaStream_t stream);

// Partial sums of the global norm: kNormBlocks fixed stretches of the buffer.
inline constexpr uint32_t kNormBlocks = 1024;
// *total = sum of x[i]^2 in double (not finite when an element is not); partials holds
// kNormBlocks doubles.
cudaError_t sum_of_squares(const float* x, uint64_t count, double* partials, double* total, cudaStream_t stream);
// x *= factor.
cudaError_t scale(float* x, uint64_t count, float factor, cudaStream_t stream);
// out = x rounded to BF16 (to nearest even): the operand copies of the products.
cudaError_t round_to_bf16(const float* x, uint64_t count, __nv_bfloat16* out, cudaStream_t stream);

// ---- Norms ----------------------------------------------------------------------------------

// Rows per partial sum of a gain's gradient; partials hold gain_partials(rows, width) floats.
inline constexpr uint32_t kGainChunkRows = 16;
inline uint64_t gain_partials(uint32_t rows, uint32_t width) {
  return uint64_t((rows + kGainChunkRows - 1) / kGainChunkRows) * width;
}

// y = x * rstd * gain per row, rstd = 1 / sqrt(mean(x^2) + eps) saved per row.
cudaError_t rmsnorm_forward(const float* x, const float* gain, uint32_t rows, uint32_t width, float eps, float* rstd,
                            float* y, cudaStream_t stream);
// dx += d(y)/d(x)^T dy; dgain += the sum over rows of dy * x * rstd.
cudaError_t rmsnorm_backward(const float* dy, const float* x, const float* rstd, const float* gain, uint32_t rows,
                             uint32_t width, float* partials, float* dx, float* dgain, cudaStream_t stream);

// The fused Q/K/V rows: q_heads query heads, then kv_heads key heads, then kv_heads value heads,
// head_dim each; a row's position is its index within its sequence of seq_len rows.
struct QkvShape {
  uint32_t rows = 0;
  uint32_t seq_len = 0;
  uint32_t q_heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;  // even, at most kMaxHeadDim
  KIPP_CUDA_HD uint32_t qk_width() const { return (q_heads + kv_heads) * head_dim; }
  KIPP_CUDA_HD uint32_t qkv_width() const { return (q_heads + 2 * kv_heads) * head_dim; }
};
inline constexpr uint32_t kMaxHeadDim = 256;

// Per-head RMSNorm and rotate-half RoPE of the Q and K heads of qkv into qk [rows, qk_width];
// rstd [rows, q_heads + kv_heads]; rope_cos/rope_sin [seq_len, head_dim / 2].
cudaError_t qk_norm_rope_forward(const float* qkv, const float* q_gain, const float* k_gain, const QkvShape& shape,
                                 const float* rope_cos, const float* rope_sin, float eps, float* rstd, float* qk,
                                 cudaStream_t stream);
// From d(qk): the Q and K columns of dqkv (written) and dq_gain, dk_gain (+=); partials hold
// gain_partials(rows, 2 * head_dim) floats.
cudaError_t qk_norm_rope_backward(const float* dqk, const float* qkv, const float* rstd, const float* q_gain,
                                  const float* k_gain, const QkvShape& shape, const float* rope_cos,
                                  const float* rope_sin, float* partials, float* dqkv, float* dq_gain, float* dk_gain,
                                  cudaStream_t stream);

// ---- Feed-forward and embedding -------------------------------------------------------------

// act = silu(gate) * up of gate_up [rows, 2 * width] (gate then up per row).
cudaError_t swiglu_forward(const float* gate_up, uint32_t rows, uint32_t width, float* act, cudaStream_t stream);
// In place: gate_up becomes d(gate_up) and act_grad (d(act) on entry) becomes act.
cudaError_t swiglu_backward(float* gate_up, float* act_grad, uint32_t rows, uint32_t width, cudaStream_t stream);

// out[row] = table[ids[row]] (ids checked on the host, see train_embedding_plan.h).
cudaError_t embedding_forward(const float* table, const int32_t* ids, uint32_t rows, uint32_t width, float* out,
                              cudaStream_t stream);
// dtable[ids[i]] += dx[rows[j]] for the rows j of each id in order (an EmbeddingGradPlan in
// device memory: id_count ids, id_count + 1 starts, the rows).
cudaError_t embedding_backward(const float* dx, const int32_t* plan_ids, const uint32_t* plan_starts,
                               const uint32_t* plan_rows, uint32_t id_count, uint32_t width, float* dtable,
                               cudaStream_t stream);

}  // namespace kipp::cuda::train

namespace kipp::cuda::train {

// ---- Causal attention -----------------------------------------------------------------------

// Causal grouped-query attention without the T x T matrix: one warp per (query row, query head)
// walks its keys with an online softmax (head_dim a multiple of 32, at most kMaxHeadDim).
// qk [rows, qk_width]: the rotated Q and K heads; the V heads are qkv's; out [rows, q_heads *
// head_dim]; stats [rows, q_heads, 2]: the row's score maximum and 1 / sum of exponentials,
// from which the backward recomputes the probabilities.
cudaError_t attention_forward(const float* qk, const float* qkv, const QkvShape& shape, float* stats, float* out,
                              cudaStream_t stream);
// From d(out): the Q and K columns of dqk and the V columns of dqkv (written). Each key row's
// dK and dV are summed by one warp over its group's query heads and the later query rows in
// order, so no two warps add to one value. `row_dots` holds rows * q_heads floats.
cudaError_t attention_backward(const float* qk, const float* qkv, const float* out, const float* stats,
                               const float* dout, const QkvShape& shape, float* row_dots, float* dqk, float* dqkv,
                               cudaStream_t stream);

}  // namespace kipp::cuda::train
