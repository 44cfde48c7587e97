// BF16 weights packed as panels (bf16_panels.h) times BF16 inputs on AVX2: each 32-byte half of
// a panel's 64-byte line (8 outputs x one column pair) is widened into the pair's two columns as
// FP32 vectors, each multiplied by that column's input value broadcast to every lane, so the 8
// outputs sum in their own lanes and need no reduction. The walk over rows and panels is the
// AVX-512 table's (bf16_panel_walk.h).
#pragma once

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::avx2 {

// ref::matmul's contract for BF16 weights packed by pack_bf16_panels (w.panels), on a CPU with
// AVX2 and FMA. Every output has one FP32 accumulator adding its products with FMA in column
// order: a result never depends on the rows or panels computed beside it.
void bf16_panels_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

}  // namespace kipp::kernels::avx2
