// Reference kernels: plain scalar loops, one per operation of the Qwen3 forward pass. They
// are the oracle the fast kernels are tested against and, until those exist, what runs.
//
// Determinism contract (the batching and paging gates rely on it): every output element is
// computed by a fixed sequence of float operations that depends only on its own inputs, never
// on how many rows are processed together or where a K/V block lives in memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weights.h"

namespace kipp::kernels::ref {

// Dot product in 16 interleaved float lanes summed pairwise at the end: a fixed order the
// compiler can vectorize without reassociating.
float dot(const float* a, const float* b, size_t n);
float dot_bf16(const float* a, const uint16_t* b, size_t n);

// Row `row` of `w` as float32.
void dequantize_row(const WeightMatrix& w, size_t row, float* out);

// out[r * out_stride + o] = dot(w row o, x + r * x_stride) for r < n_rows, o < w.rows.
// Each weight row is read once for all `n_rows` inputs; `row_scratch` holds w.cols floats.
void matmul(const WeightMatrix& w, const float* x, size_t n_rows, size_t x_stride, float* out,
            size_t out_stride, float* row_scratch);

// out = x / sqrt(mean(x^2) + eps) * weight over n elements (in place allowed).
void rms_norm(const float* x, const float* weight, float* out, size_t n, float eps);

// cos and sin of position * theta^(-2i/head_dim) for i < head_dim / 2, angles in double.
void rope_angles(size_t position, size_t head_dim, double theta, float* cos_out, float* sin_out);

// Rotate-half RoPE in place on `heads` vectors of head_dim: (x_i, x_{i+d/2}) rotated by angle i.
void rope(float* x, size_t heads, size_t head_dim, const float* cos, const float* sin);

// Numerically stable softmax in place.
void softmax(float* x, size_t n);

// Causal grouped-query attention of one query position over K/V positions [0, length):
// q and out are [heads][head_dim]; query head h reads kv head h / (heads / kv_heads).
// `scores` holds `length` floats.
void attention(const float* q, size_t heads, const KvLayerView& kv, size_t length, float scale,
               float* scores, float* out);

// out = silu(gate) * up.
void swiglu(const float* gate, const float* up, float* out, size_t n);

// acc += x.
void add(float* acc, const float* x, size_t n);

// K/V as the cache stores them: BF16, round to nearest even.
void store_bf16(const float* in, uint16_t* out, size_t n);

}  // namespace kipp::kernels::ref
