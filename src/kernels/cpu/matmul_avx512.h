// Matrix products for CPUs with AVX-512 BF16 and VNNI:
// BF16 weights with VDPBF16PS, Q8_0 and affine4 weights with VPDPBUSD on Q8 inputs.
#pragma once

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::avx512 {

// Whether this CPU runs the functions below.
bool supported();

// ref::matmul's contract, for BF16, Q8_0 and Q4_1 weights (others go to the reference).
// BF16 packed as panels (w.panels): bf16_panels_matmul (matmul_bf16_panels_avx512.h). BF16 as
// stored (matrices of a partial panel): every output has its own accumulator over the whole
// row, in 64-byte steps, reduced at the end, so tiling over rows and outputs shares loads and
// never changes a result. Q8_0 and Q4_1 go to quantized_matmul (matmul_int8_avx512.h), which
// equals the reference bit for bit.
void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

// KernelTable::packs_weights / pack_weights: BF16 matrices of whole 16-row panels and 32-column
// blocks as BF16 panels (bf16_panels.h), Q8_0 and Q4_1 ones of whole panels as the integer
// kernels' panels (stores_panels, matmul_int8_avx512.h), so no product packs them again.
bool packs_weights(const WeightMatrix& w);
bool pack_weights(const WeightMatrix& w, uint8_t* out);

// ref::dequantize_row's contract, reading packed BF16 matrices too (a tied output head, packed,
// is also the token embedding).
void dequantize_row(const WeightMatrix& w, size_t row, float* out);

}  // namespace kipp::kernels::avx512
