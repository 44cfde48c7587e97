// Reference kernels: plain scalar loops, one per operation of the Qwen3 forward pass. They
// are the oracle the fast kernels are tested against and, until those exist, what runs.
//
// Determinism contract (the batching and paging gates rely on it): every output element is
// computed by a fixed sequence of float operations that depends only on its own inputs, never
// on how many rows are processed together or where a K/V block lives in memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::ref {

// Dot product in 16 interleaved float lanes summed pairwise at the end: a fixed order the
// compiler can vectorize without reassociating.
float dot(const float* a, const float* b, size_t n);
float dot_bf16(const float* a, const uint16_t* b, size_t n);

// Row `row` of `w` as float32.
void dequantize_row(const WeightMatrix& w, size_t row, float* out);

// Prepares rows [first, first + count) of `in` (made by input_layout) from its floats, in its
// format (see matmul_input.h). Every implementation prepares bit for bit the same values.
void prepare_rows(const PreparedInput& in, size_t first, size_t count);

// input_layout, then every row prepared by the reference.
PreparedInput prepare_input(InputFormat format, const float* x, size_t rows, size_t x_stride, size_t cols,
                            void* storage);

// out[r * out_stride + o] = sum over i of w[o][i] * in[r][i], for o < w.rows and r < in.rows,
// with `in` prepared as F32 (the reference table's format, for any weight type) or in
// input_format(w.type) (the fast tables' rounding, to test them against on the same values).
// F32 inputs: dot() of the dequantized row; BF16: the same lanes over the exact products; Q8:
// per block, the exact integer sum of codes times (weight scale * input scale) (affine4 adds
// min * the input's scaled code sum), blocks added in order. Each weight row is read once for
// all rows.
void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

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
void attention(const float* q, size_t heads, const KvLayerView& kv, size_t length, float scale, float* scores,
               float* out);

// Causal attention of `rows` consecutive query positions [first_position, first_position +
// rows) of one sequence, for the `group` query heads that share the one kv head `kv` views
// (kv_heads 1, offsets at that head): query row r's heads at q + r * q_stride, its results at
// out + r * out_stride (group * head_dim floats each). `scratch` holds
// attention_scratch_floats(...) floats.
void attention_rows(const float* q, size_t q_stride, size_t rows, size_t first_position, size_t group,
                    const KvLayerView& kv, float scale, float* scratch, float* out, size_t out_stride);

// Scratch attention_rows needs, for any kernel table.
size_t attention_scratch_floats(size_t context_length, size_t rows, size_t group, size_t head_dim);

// out = silu(gate) * up.
void swiglu(const float* gate, const float* up, float* out, size_t n);

// acc += x.
void add(float* acc, const float* x, size_t n);

// K/V as the cache stores them: BF16, round to nearest even.
void store_bf16(const float* in, uint16_t* out, size_t n);

}  // namespace kipp::kernels::ref
