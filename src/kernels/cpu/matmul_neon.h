// Matrix products on ARM64 NEON: BF16 weights widened to FP32 in registers and multiplied with
// FMA (with BFDOT where the CPU has FEAT_BF16), Q8_0 and affine4 weights on Q8 inputs with SDOT
// where it has FEAT_DotProd and widening multiplies elsewhere. Weights are read as stored (the
// table packs nothing). Built only for ARM64.
#pragma once

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::neon {

// The optional instructions this CPU has, detected once at start-up.
struct Features {
  bool dotprod = false;  // FEAT_DotProd: SDOT
  bool bf16 = false;     // FEAT_BF16: BFDOT
};
const Features& cpu_features();

// ref::matmul's contract, for BF16 weights on BF16 inputs and Q8_0 / Q4_1 weights on Q8 inputs
// (anything else goes to the reference), on the instructions `features` allows (a subset of
// cpu_features()). BF16: every (input row, output) pair has its own accumulator over the whole
// row, reduced the same way at the end, so tiles never change a result. Q8_0 / Q4_1: each
// block's integer sum is exact and the float step follows ref/q8_rows.h, so every result is the
// reference's bit for bit.
void matmul_with(const Features& features, const WeightMatrix& w, const PreparedInput& in, float* out,
                 size_t out_stride);

// matmul_with(cpu_features(), ...): the neon table's product.
void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

}  // namespace kipp::kernels::neon
