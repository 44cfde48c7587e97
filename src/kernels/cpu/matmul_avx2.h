// Matrix products for x86 CPUs with AVX2, FMA and F16C but no AVX-512: BF16 weights widened to
// FP32 in registers and multiplied with FMA, Q8_0 and affine4 weights with VPMADDUBSW (or, in the
// avx2-vnni table, VPDPBUSD) on Q8 inputs (matmul_int8_avx2.h).
#pragma once

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

// What every function of the AVX2 kernels is compiled for (the library as a whole is not).
#define KIPP_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace kipp::kernels::avx2 {

// Whether this CPU runs the functions below.
bool supported();

// ref::matmul's contract, for BF16 weights on BF16 inputs and Q8_0 / Q4_1 weights on Q8 inputs
// (anything else goes to the reference). BF16 packed as panels (w.panels): bf16_panels_matmul
// (matmul_bf16_panels_avx2.h). BF16 as stored (matrices of a partial panel): every (input row,
// output) pair has its own accumulator over the whole row, reduced the same way at the end, so
// tiling several rows and outputs to share loads never changes a result.
void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

// KernelTable::packs_weights / pack_weights of both AVX2 tables: BF16 matrices of whole 16-row
// panels and 32-column blocks as BF16 panels (bf16_panels.h), Q8_0 and Q4_1 ones of whole panels
// as the integer panels (pack_quantized, matmul_int8_avx2.h).
bool packs_weights(const WeightMatrix& w);
bool pack_weights(const WeightMatrix& w, uint8_t* out);

// ref::dequantize_row's contract, reading packed BF16 matrices too (a tied output head, packed,
// is also the token embedding).
void dequantize_row(const WeightMatrix& w, size_t row, float* out);

}  // namespace kipp::kernels::avx2
