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

// The BF16 panels [first_panel, end_panel) of an FP32 matrix of `rows` x `cols` whose element
// (r, c) is a[r * row_stride + c * col_stride] (row-major or transposed), each element rounded by
// f32_to_bf16 and the matrix zero-padded to whole panels and 32-column blocks: the bytes
// pack_bf16_panels writes for that padded BF16 matrix, from its panel first_panel on, at `out`.
// Products of matrices that change every call (training) pack them this way per call.
void pack_f32_bf16_panels(const float* a, size_t rows, size_t cols, size_t row_stride, size_t col_stride,
                          size_t first_panel, size_t end_panel, uint8_t* out);

// Rows [first, end) of the same kind of FP32 matrix (`cols` columns) rounded by f32_to_bf16 into
// BF16 rows of `padded` values (zeros after cols), row r at out + r * padded: what BF16 products
// read as their input rows, or as the matrix of a table that does not pack BF16 matrices.
void round_f32_bf16_rows(const float* a, size_t row_stride, size_t col_stride, size_t cols, size_t padded, size_t first,
                         size_t end, uint16_t* out);

// Row `row` of a matrix packed by pack_bf16_panels, as FP32 (ref::dequantize_row's contract).
void dequantize_bf16_panel_row(const WeightMatrix& w, size_t row, float* out);

}  // namespace kipp::kernels
