// Matrix products for CPUs with AVX-512 BF16 and VNNI (Zen 4, Sapphire Rapids and later):
// BF16 weights with VDPBF16PS, Q8_0 and affine4 weights with VPDPBUSD on Q8 inputs.
#pragma once

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::avx512 {

// Whether this CPU runs the functions below.
bool supported();

// ref::matmul's contract, for BF16, Q8_0 and Q4_1 weights (others go to the reference).
// Every output has its own accumulator over the whole row, in 64-byte steps, reduced at the end:
// tiling over rows and outputs shares loads, never changes a result.
void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

}  // namespace kipp::kernels::avx512
