// Q8_0 and affine4 (Q4_1) weights times Q8 inputs with VPDPBUSD, for CPUs with AVX-512 VNNI.
// Weights are arranged 16 rows at a time into panels (codes interleaved so one 32-bit lane is
// one output): once at load time (pack_quantized_panels, quant_panels.h), or per call into per-thread buffers.
// Prefill's input rows stream past two panels at once, 6 rows per tile (decoding's 1-8 rows past
// one panel, a single sequential stream of weights): the integer sum of each block
// lands whole in its output's lane, so every result is the reference's bit for bit
// (ref/q8_rows.h) whatever the number of rows, and prefill reads each code once per 6 rows.
#pragma once

#include "format/quant.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::avx512 {

// ref::matmul's contract for Q8_0 and Q4_1 weights, stored as the file holds them or (w.panels)
// as pack_quantized_panels arranged them; the caller checks avx512::supported().
void quantized_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

// The panels as the shared packer arranges them at load time (quant_panels.h).
using cpu::kPanelRows;
using cpu::pack_quantized_panels;
using cpu::stored_panel_block;
using cpu::StoredPanelBlock;
using cpu::stores_panels;

}  // namespace kipp::kernels::avx512
