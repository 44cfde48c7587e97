// Q8_0 and affine4 (Q4_1) weights times Q8 inputs with VPDPBUSD, for CPUs with AVX-512 VNNI.
// Weights are arranged 16 rows at a time into panels (codes interleaved so one 32-bit lane is
// one output): once at load time (pack_quantized_panels), or per call into per-thread buffers.
// Input rows stream past two panels at once, 6 rows per tile: the integer sum of each block
// lands whole in its output's lane, so every result is the reference's bit for bit
// (ref/q8_rows.h) whatever the number of rows, and prefill reads each code once per 6 rows.
#pragma once

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::avx512 {

// ref::matmul's contract for Q8_0 and Q4_1 weights, stored as the file holds them or (w.panels)
// as pack_quantized_panels arranged them; the caller checks avx512::supported().
void quantized_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

// Whether pack_quantized_panels takes w: Q8_0 or Q4_1 with whole panels of 16 rows.
bool stores_panels(const WeightMatrix& w);

// Writes w's bytes (rows * row_bytes of them) to `out` rearranged into the panels the products
// read, so that no product packs them again: the same bytes per 16 rows, so a range of whole
// panels is still at data + first_row * row_bytes. Requires stores_panels(w).
void pack_quantized_panels(const WeightMatrix& w, uint8_t* out);

}  // namespace kipp::kernels::avx512
