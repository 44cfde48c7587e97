// Matrix products for CPUs with AVX-512 BF16 and VNNI (Zen 4, Sapphire Rapids and later):
// BF16 weights with VDPBF16PS, Q8_0 and affine4 weights with VPDPBUSD on Q8 inputs.
#pragma once

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::avx512 {

// Whether this CPU runs the functions below.
bool supported();

// ref::matmul's contract, for BF16, Q8_0 and Q4_1 weights (others go to the reference).
// BF16: every output has its own accumulator over the whole row, in 64-byte steps, reduced at
// the end, so tiling over rows and outputs shares loads and never changes a result. Q8_0 and
// Q4_1 go to quantized_matmul (matmul_int8_avx512.h), which equals the reference bit for bit.
void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

// KernelTable::pack_weights: Q8_0 and Q4_1 matrices of whole 16-row panels (stores_panels,
// matmul_int8_avx512.h) are stored packed, so no product packs them again.
bool pack_weights(const WeightMatrix& w, uint8_t* out);

}  // namespace kipp::kernels::avx512
