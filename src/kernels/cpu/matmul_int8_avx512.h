// Q8_0 and affine4 (Q4_1) weights times Q8 inputs with VPDPBUSD, for CPUs with AVX-512 VNNI.
// Weights are repacked 16 rows at a time into per-thread panels (codes interleaved so one
// 32-bit lane is one output) and input rows stream past two panels at once, 6 rows per tile:
// the integer sum of each block lands whole in its output's lane, so every result is the
// reference's bit for bit (ref/q8_rows.h) whatever the number of rows, and prefill reads each
// packed code once per 6 input rows.
#pragma once

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::avx512 {

// ref::matmul's contract for Q8_0 and Q4_1 weights; the caller checks avx512::supported().
void quantized_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

}  // namespace kipp::kernels::avx512
