// The panel layout of packed Q8_0 and affine4 (Q4_1) weights, shared by the tables whose integer
// products read them (AVX2, AVX-VNNI, AVX-512 VNNI, AMX): 16 weight rows at a time, arranged so
// that one 32-bit lane of a product is one output and each block's integer sum lands whole in
// its lane. Packed once at load time (KernelTable::pack_weights); portable code, as packing is
// not on any product's path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/quant.h"
#include "kernels/weights.h"

namespace kipp::kernels::cpu {

// One 32-column block of a stored panel (pack_quantized_panels): the 16 rows' scales d as F16
// from byte 0, for affine4 their minimums as F16 from byte 32, then the codes from codes_offset:
// Q8_0 as 8 vectors of 64 bytes, vector g holding codes 4g..4g+3 of row j (+ 128, unsigned) in
// bytes 4j..4j+3; affine4 as 4 vectors of nibbles, vector h holding bytes 4h..4h+3 of each row's
// block in its lane (low nibbles: codes 4h..4h+3, high nibbles: codes 16 + 4h..). A 64-byte
// vector is also two 32-byte halves of 8 rows each.
struct StoredPanelBlock {
  size_t bytes;  // of one block of a whole panel
  size_t codes_offset;
};
constexpr size_t kPanelRows = 16;
constexpr StoredPanelBlock stored_panel_block(bool affine) {
  return affine ? StoredPanelBlock{kPanelRows * sizeof(BlockAffine4), 64}
                : StoredPanelBlock{kPanelRows * sizeof(BlockQ8_0), 32};
}

// Whether pack_quantized_panels takes w: Q8_0 or Q4_1 with whole panels of 16 rows.
bool stores_panels(const WeightMatrix& w);

// Writes w's bytes (rows * row_bytes of them) to `out` rearranged into panels, so that no
// product packs them again: the same bytes per 16 rows, so a range of whole panels is still at
// data + first_row * row_bytes. Requires stores_panels(w).
void pack_quantized_panels(const WeightMatrix& w, uint8_t* out);

}  // namespace kipp::kernels::cpu
