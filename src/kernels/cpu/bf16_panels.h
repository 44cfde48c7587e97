// BF16 matrices stored as panels of 16 rows: within a panel, one 1 KiB tile per 32-column block
// whose 64-byte line k holds the 16 rows' columns 32b + 2k and 32b + 2k + 1 (row n at bytes
// 4n..4n+3). It is the operand layout of Intel AMX's TDPBF16PS, and VDPBF16PS multiplies a line
// by one input pair broadcast to every lane, giving 16 outputs in their own lanes. A panel is one
// sequential range of memory, so a product reads each panel as a single stream, and whole panels
// start where their first row did (a range of panels packs and reads on its own).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weights.h"

namespace kipp::kernels {

inline constexpr size_t kBf16PanelRows = 16;
inline constexpr size_t kBf16BlockColumns = 32;
inline constexpr size_t kBf16TileBytes = kBf16PanelRows * kBf16BlockColumns * 2;

// Whether pack_bf16_panels takes w: BF16 with whole panels of 16 rows and whole 32-column blocks.
bool stores_bf16_panels(const WeightMatrix& w);

// Writes w (stores_bf16_panels) into out (w.rows * w.row_bytes bytes) as panels.
void pack_bf16_panels(const WeightMatrix& w, uint8_t* out);

// Row `row` of a matrix packed by pack_bf16_panels, as FP32 (ref::dequantize_row's contract).
void dequantize_bf16_panel_row(const WeightMatrix& w, size_t row, float* out);

}  // namespace kipp::kernels
