// Q8_0 and affine4 (Q4_1) weights times Q8 inputs with VPDPBUSD, for CPUs with AVX-512 VNNI.
// Weights are arranged 16 rows at a time into panels (codes interleaved so one 32-bit lane is
// one output): once at load time (pack_quantized_panels), or per call into per-thread buffers.
// Prefill's input rows stream past two panels at once, 6 rows per tile (decoding's 1-8 rows past
// one panel, a single sequential stream of weights): the integer sum of each block
// lands whole in its output's lane, so every result is the reference's bit for bit
// (ref/q8_rows.h) whatever the number of rows, and prefill reads each code once per 6 rows.
#pragma once

#include "format/quant.h"
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

// One 32-column block of a stored panel (pack_quantized_panels): the 16 rows' scales d as F16
// from byte 0, for affine4 their minimums as F16 from byte 32, then the codes from codes_offset:
// Q8_0 as 8 vectors of 64 bytes, vector g holding codes 4g..4g+3 of row j (+ 128, unsigned) in
// bytes 4j..4j+3; affine4 as 4 vectors of nibbles, vector h holding bytes 4h..4h+3 of each row's
// block in its lane (low nibbles: codes 4h..4h+3, high nibbles: codes 16 + 4h..).
struct StoredPanelBlock {
  size_t bytes;  // of one block of a whole panel
  size_t codes_offset;
};
constexpr size_t kPanelRows = 16;
constexpr StoredPanelBlock stored_panel_block(bool affine) {
  return affine ? StoredPanelBlock{kPanelRows * sizeof(BlockAffine4), 64}
                : StoredPanelBlock{kPanelRows * sizeof(BlockQ8_0), 32};
}

}  // namespace kipp::kernels::avx512
