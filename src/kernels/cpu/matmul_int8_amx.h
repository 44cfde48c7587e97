// Q8_0 and affine4 (Q4_1) products on Intel AMX: TDPBSUD multiplies up to 16 rows of Q8 input
// codes by one 32-column block of a stored panel of 16 weight rows (avx512::pack_quantized_panels
// arranges them as the instruction reads them) into exact integer block sums, in one instruction
// where VPDPBUSD takes 8 per input row. The vector units only apply the block scales, with the
// reference's float sequence, so every result is the reference's bit for bit.
#pragma once

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::amx {

// Fewer input rows go to the VNNI kernel (avx512::quantized_matmul), which streams the weights
// faster while its 8 products per row and block still fit; from 9 rows on the tiles are faster
// (bench/kernel_bench over 8, 16 and 64 rows, with and without AMX, shows where they cross).
inline constexpr size_t kMinTileRows = 9;

// Whether this CPU has AMX-INT8 and amx::supported() holds (the process may use the tiles).
bool int8_supported();

// Whether amx::matmul multiplies packed Q8_0/affine4 weights by `rows` input rows on the tiles:
// kMinTileRows or more on a CPU with int8_supported().
bool int8_tiles_for_rows(size_t rows);

// ref::matmul's contract for Q8_0 and Q4_1 weights stored as panels (w.panels, rows a multiple
// of 16); the caller checks int8_supported().
void quantized_panels_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

}  // namespace kipp::kernels::amx
