// The non-GEMM passes of the training forward and backward, each one fused OpenMP loop over
// rows (static schedules), plus causal attention whose small products run as single-threaded
// sgemm calls inside the parallel loop. FP32 throughout; same inputs and thread count give
// bitwise the same outputs, and the gain gradients are reduced over fixed chunks of rows in
// order, so they do not depend on the thread count either.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kipp::train::ops {

// Rows per partial sum of a norm gain's gradient (see rmsnorm_backward).
inline constexpr size_t kReductionRows = 16;
// Query rows per block of causal attention: a block only multiplies the keys up to its last row.
inline constexpr size_t kAttentionBlock = 64;

// Floats of `partials` the norm backward passes need for `rows` rows of `width` gains.
inline size_t reduction_partials(size_t rows, size_t width) {
  return (rows + kReductionRows - 1) / kReductionRows * width;
}

// y = x * rstd * gain per row of `width`, rstd = 1 / sqrt(mean(x^2) + eps) written to rstd[row].
void rmsnorm_forward(const float* x, const float* gain, size_t rows, size_t width, float eps, float* rstd, float* y);
// The same y from a saved rstd (bitwise equal to rmsnorm_forward's).
void rmsnorm_apply(const float* x, const float* rstd, const float* gain, size_t rows, size_t width, float* y);
// dx += d(y)/d(x)^T dy and dgain += sum over rows of dy * x * rstd.
void rmsnorm_backward(const float* dy, const float* x, const float* rstd, const float* gain, size_t rows, size_t width,
                      float* partials, float* dx, float* dgain);

// Per-head geometry of the fused Q/K/V buffer: row n holds q_heads query heads, then kv_heads key
// heads, then kv_heads value heads, each head_dim wide (the q, k, v projections' outputs side by
// side). The normalized and rotated Q and K of a row are stored as (q_heads + kv_heads) heads.
struct HeadShape {
  size_t batch = 0;
  size_t seq_len = 0;  // rows of one sequence; a row's position is its index within the sequence
  size_t q_heads = 0;
  size_t kv_heads = 0;
  size_t head_dim = 0;
  size_t rows() const { return batch * seq_len; }
  size_t q_width() const { return q_heads * head_dim; }
  size_t qk_width() const { return (q_heads + kv_heads) * head_dim; }
  size_t qkv_width() const { return (q_heads + 2 * kv_heads) * head_dim; }
};

// Rotary tables for positions [0, positions): cos and sin of position * theta^(-2i/head_dim),
// [positions, head_dim / 2] each.
struct RopeTables {
  const float* cos = nullptr;
  const float* sin = nullptr;
};

// Per-head RMSNorm (gains q_gain / k_gain) and rotate-half RoPE of the Q and K heads of `qkv`
// into `qk` [rows, qk_width]; rstd [rows, q_heads + kv_heads].
void qk_norm_rope_forward(const float* qkv, const float* q_gain, const float* k_gain, const HeadShape& shape,
                          RopeTables rope, float eps, float* rstd, float* qk);
// From d(qk): the Q and K columns of dqkv (written, not accumulated) and dq_gain, dk_gain (+=).
// `partials` holds reduction_partials(rows, 2 * head_dim) floats.
void qk_norm_rope_backward(const float* dqk, const float* qkv, const float* rstd, const float* q_gain,
                           const float* k_gain, const HeadShape& shape, RopeTables rope, float* partials, float* dqkv,
                           float* dq_gain, float* dk_gain);

// Causal grouped-query attention, softmax(q k^T / sqrt(head_dim)) v, of the rotated heads in
// `qk` and the value heads in `qkv`, into out [rows, q_width]. Saves the softmax statistics
// (row max and 1 / sum of exponentials) per (row, q head) in `stats` [rows, q_heads, 2] so the
// backward recomputes exactly the same probabilities. `scratch`: attention_scratch floats per
// thread of `threads`.
size_t attention_scratch(size_t max_seq_len);
void attention_forward(const float* qk, const float* qkv, const HeadShape& shape, float* scratch, int threads,
                       float* stats, float* out);
// From d(out): the Q columns of dqk (written), and per query head the gradients of the key and
// value heads it read, dk_heads and dv_heads [rows, q_width] (written), which
// reduce_kv_heads sums over each group.
void attention_backward(const float* qk, const float* qkv, const float* stats, const float* dout,
                        const HeadShape& shape, float* scratch, int threads, float* dqk, float* dk_heads,
                        float* dv_heads);
// out[row, g] = sum over the query heads j of group g, in order, of per_q_head[row, j]; out's
// rows are `out_stride` floats apart.
void reduce_kv_heads(const float* per_q_head, const HeadShape& shape, size_t out_stride, float* out);

// act = silu(gate) * up of gate_up [rows, 2 * width] (gate then up per row) into act [rows, width].
void swiglu_forward(const float* gate_up, size_t rows, size_t width, float* act);
// In place: gate_up becomes d(gate_up) and act_grad (d(act) on entry) becomes act, the input
// of the down projection its weight gradient needs.
void swiglu_backward(float* gate_up, float* act_grad, size_t rows, size_t width);

// Cross-entropy of each logits row against its target (natural log) into row_loss; with
// `backward` the row becomes grad_scale * (softmax - onehot) in place.
void cross_entropy(float* logits, const int32_t* targets, size_t rows, size_t vocab, bool backward, float grad_scale,
                   float* row_loss);

// out[row] = table[ids[row]]; and dtable[ids[row]] += dx[row], summed in row order per column.
void embedding_forward(const float* table, const int32_t* ids, size_t rows, size_t width, float* out);
void embedding_backward(const float* dx, const int32_t* ids, size_t rows, size_t width, float* dtable);

}  // namespace kipp::train::ops
