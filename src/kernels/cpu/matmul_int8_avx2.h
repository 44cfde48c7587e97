// Q8_0 and affine4 (Q4_1) weights, as stored, times Q8 inputs on AVX2. Each block's integer dot
// is exact (VPMADDUBSW on unsigned x signed codes: |w| x sign-applied input for Q8_0, the
// nibbles as they are for affine4, then VPMADDWD), the 8 outputs of a tile share one vector of
// block sums, and the float step follows the reference's order (ref/q8_rows.h): every result is
// the reference's bit for bit whatever the tile.
#pragma once

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::avx2 {

// ref::matmul's contract for Q8_0 and Q4_1 weights on Q8 inputs; the caller checks
// avx2::supported().
void quantized_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

}  // namespace kipp::kernels::avx2
