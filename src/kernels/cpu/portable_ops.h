// Kernels written once with Google Highway and compiled for every SIMD target it knows (SSE4,
// AVX2, AVX-512, ...; a scalar fallback elsewhere); the best one this CPU runs is picked at
// start-up. Each has its reference's contract (kernels/ref/ops.h). Input preparation, BF16
// storage and RoPE compute exactly the reference's values; the rest differ from it only in the
// order float sums are added (and exp() in its last bits).
#pragma once

#include "kernels/ref/ops.h"

namespace kipp::kernels::portable {

// Limits the targets picked from then on to AVX2 and below, for the whole process: an AVX2 table
// forced on an AVX-512 CPU then runs its portable entries as an AVX2 CPU would.
void cap_at_avx2();

void prepare_rows(const PreparedInput& in, size_t first, size_t count);
void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);
void rms_norm(const float* x, const float* weight, float* out, size_t n, float eps);
void rope(float* x, size_t heads, size_t head_dim, const float* cos, const float* sin);
// Streams over the K/V blocks with an online softmax: one block of scores at a time, so memory
// does not grow with the context; `scores` needs kKvBlockPositions floats.
void attention(const float* q, size_t heads, const KvLayerView& kv, size_t length, float scale, float* scores,
               float* out);
void attention_rows(const float* q, size_t q_stride, size_t rows, size_t first_position, size_t group,
                    const KvLayerView& kv, float scale, float* scratch, float* out, size_t out_stride);
void swiglu(const float* gate, const float* up, float* out, size_t n);
void add(float* acc, const float* x, size_t n);
void store_bf16(const float* in, uint16_t* out, size_t n);

}  // namespace kipp::kernels::portable
