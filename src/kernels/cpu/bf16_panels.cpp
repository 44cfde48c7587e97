#include "kernels/cpu/bf16_panels.h"

#include <algorithm>
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

void pack_f32_bf16_panels(const float* a, size_t rows, size_t cols, size_t row_stride, size_t col_stride,
                          size_t first_panel, size_t end_panel, uint8_t* out) {
  const size_t padded = (cols + kBf16BlockColumns - 1) / kBf16BlockColumns * kBf16BlockColumns;
  const size_t panel_elements = kBf16PanelRows * padded;
  // Element n of line k in block b of a panel, as uint16 offsets: the pair's first half.
  const auto at = [](size_t c, size_t n) {
    return (c / kBf16BlockColumns) * (kBf16TileBytes / 2) + ((c % kBf16BlockColumns) / 2) * kBf16PanelRows * 2 + n * 2 +
           c % 2;
  };
  for (size_t p = first_panel; p < end_panel; ++p) {
    uint16_t* panel = reinterpret_cast<uint16_t*>(out) + (p - first_panel) * panel_elements;
    const size_t first_row = p * kBf16PanelRows;
    const size_t live = first_row < rows ? std::min(kBf16PanelRows, rows - first_row) : 0;
    if (live < kBf16PanelRows || cols < padded) std::memset(panel, 0, panel_elements * sizeof(uint16_t));
    if (col_stride == 1) {
      // Rows stored contiguously: each row's values in order, scattered to its lane of each line.
      for (size_t n = 0; n < live; ++n) {
        const float* row = a + (first_row + n) * row_stride;
        for (size_t c = 0; c < cols; ++c) panel[at(c, n)] = f32_to_bf16(row[c]);
      }
    } else {
      // Columns stored contiguously (a transposed matrix): each column's 16 values fill one half
      // of the pairs of one line.
      for (size_t c = 0; c < cols; ++c) {
        const float* column = a + c * col_stride + first_row * row_stride;
        uint16_t* line = panel + at(c, 0);
        for (size_t n = 0; n < live; ++n) line[2 * n] = f32_to_bf16(column[n * row_stride]);
      }
    }
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
