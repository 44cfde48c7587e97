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

// Compiled for AVX-512 too where the CPU has it: the conversions below are written to vectorize.
#if defined(__x86_64__)
#define KIPP_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define KIPP_VECTOR_CLONES
#endif

KIPP_VECTOR_CLONES void pack_f32_bf16_panels(const float* a, size_t rows, size_t cols, size_t row_stride,
                                             size_t col_stride, size_t first_panel, size_t end_panel, uint8_t* out) {
  const size_t blocks = (cols + kBf16BlockColumns - 1) / kBf16BlockColumns;
  const size_t panel_pairs = kBf16PanelRows * blocks * kLines, tile_pairs = kBf16PanelRows * kLines;
  // One pair's value: columns c and c + 1 of a row as BF16, zero past the matrix.
  const auto pair = [&](size_t r, size_t c) {
    const uint32_t lo = c < cols ? f32_to_bf16(a[r * row_stride + c * col_stride]) : 0;
    const uint32_t hi = c + 1 < cols ? f32_to_bf16(a[r * row_stride + (c + 1) * col_stride]) : 0;
    return lo | hi << 16;
  };
  for (size_t p = first_panel; p < end_panel; ++p) {
    uint32_t* panel = reinterpret_cast<uint32_t*>(out) + (p - first_panel) * panel_pairs;
    const size_t first_row = p * kBf16PanelRows;
    const size_t live = first_row < rows ? std::min(kBf16PanelRows, rows - first_row) : 0;
    if (live < kBf16PanelRows) std::memset(panel, 0, panel_pairs * sizeof(uint32_t));
    for (size_t b = 0; b < blocks; ++b) {
      uint32_t* tile = panel + b * tile_pairs;
      const size_t c0 = b * kBf16BlockColumns;
      if (c0 + kBf16BlockColumns > cols) {
        for (size_t k = 0; k < kLines; ++k)
          for (size_t n = 0; n < live; ++n) tile[k * kBf16PanelRows + n] = pair(first_row + n, c0 + 2 * k);
      } else if (col_stride == 1) {
        // Rows stored contiguously: each row's block to pairs, then the 16 x 16 pairs transposed.
        uint32_t pairs[kBf16PanelRows][kLines];
        for (size_t n = 0; n < live; ++n) {
          const float* row = a + (first_row + n) * row_stride + c0;
          for (size_t k = 0; k < kLines; ++k)
            pairs[n][k] = uint32_t{f32_to_bf16(row[2 * k])} | uint32_t{f32_to_bf16(row[2 * k + 1])} << 16;
        }
        for (size_t k = 0; k < kLines; ++k)
          for (size_t n = 0; n < live; ++n) tile[k * kBf16PanelRows + n] = pairs[n][k];
      } else {
        // Columns stored contiguously (row_stride 1, a transposed matrix): a line's 16 rows of
        // two columns lie in two runs.
        for (size_t k = 0; k < kLines; ++k) {
          const float* even = a + first_row * row_stride + (c0 + 2 * k) * col_stride;
          const float* odd = even + col_stride;
          uint32_t* line = tile + k * kBf16PanelRows;
          for (size_t n = 0; n < live; ++n)
            line[n] = uint32_t{f32_to_bf16(even[n * row_stride])} | uint32_t{f32_to_bf16(odd[n * row_stride])} << 16;
        }
      }
    }
  }
}

KIPP_VECTOR_CLONES void round_f32_bf16_rows(const float* a, size_t row_stride, size_t col_stride, size_t cols,
                                            size_t padded, size_t first, size_t end, uint16_t* out) {
  for (size_t r = first; r < end; ++r) std::fill(out + r * padded + cols, out + (r + 1) * padded, uint16_t{0});
  if (col_stride == 1) {
    for (size_t r = first; r < end; ++r) {
      const float* row = a + r * row_stride;
      uint16_t* to = out + r * padded;
      for (size_t c = 0; c < cols; ++c) to[c] = f32_to_bf16(row[c]);
    }
    return;
  }
  // A transposed matrix: each column's values for up to 16 rows lie together; 32 columns of them
  // are rounded at a time, then written out row by row.
  constexpr size_t kRows = 16, kColumns = 32;
  uint16_t block[kColumns][kRows];
  for (size_t r0 = first; r0 < end; r0 += kRows) {
    const size_t live = std::min(kRows, end - r0);
    for (size_t c0 = 0; c0 < cols; c0 += kColumns) {
      const size_t width = std::min(kColumns, cols - c0);
      for (size_t j = 0; j < width; ++j) {
        const float* column = a + (c0 + j) * col_stride + r0 * row_stride;
        for (size_t n = 0; n < live; ++n) block[j][n] = f32_to_bf16(column[n * row_stride]);
      }
      for (size_t n = 0; n < live; ++n)
        for (size_t j = 0; j < width; ++j) out[(r0 + n) * padded + c0 + j] = block[j][n];
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
