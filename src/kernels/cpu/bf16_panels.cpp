#include "kernels/cpu/bf16_panels.h"

#include <cstring>

#include "core/half.h"

namespace kipp::kernels {
namespace {

constexpr size_t kLines = kBf16BlockColumns / 2;  // column pairs per block: lines per tile

// Byte offset, within a panel, of row n's pair k of block b.
constexpr size_t pair_offset(size_t blocks_before, size_t k, size_t n) {
  return blocks_before * kBf16TileBytes + (k * kBf16PanelRows + n) * 4;
}

}  // namespace

bool stores_bf16_panels(const WeightMatrix& w) {
  return w.type == GgmlType::BF16 && w.rows > 0 && w.rows % kBf16PanelRows == 0 && w.cols % kBf16BlockColumns == 0;
}

void pack_bf16_panels(const WeightMatrix& w, uint8_t* out) {
  const size_t blocks = w.cols / kBf16BlockColumns, panel_bytes = kBf16PanelRows * w.row_bytes;
  for (size_t row = 0; row < w.rows; ++row) {
    uint8_t* panel = out + (row / kBf16PanelRows) * panel_bytes;
    const uint8_t* stored = w.data + row * w.row_bytes;
    for (size_t b = 0; b < blocks; ++b)
      for (size_t k = 0; k < kLines; ++k)
        std::memcpy(panel + pair_offset(b, k, row % kBf16PanelRows), stored + (b * kLines + k) * 4, 4);
  }
}

void dequantize_bf16_panel_row(const WeightMatrix& w, size_t row, float* out) {
  const size_t blocks = w.cols / kBf16BlockColumns;
  const uint8_t* panel = w.data + (row / kBf16PanelRows) * kBf16PanelRows * w.row_bytes;
  for (size_t b = 0; b < blocks; ++b)
    for (size_t k = 0; k < kLines; ++k) {
      uint16_t pair[2];
      std::memcpy(pair, panel + pair_offset(b, k, row % kBf16PanelRows), 4);
      out[(b * kLines + k) * 2] = bf16_to_f32(pair[0]);
      out[(b * kLines + k) * 2 + 1] = bf16_to_f32(pair[1]);
    }
}

}  // namespace kipp::kernels
