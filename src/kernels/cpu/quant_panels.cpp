#include "kernels/cpu/quant_panels.h"

#include <cstring>

namespace kipp::kernels::cpu {

bool stores_panels(const WeightMatrix& w) {
  return (w.type == GgmlType::Q8_0 || w.type == GgmlType::Q4_1) && w.row_bytes != 0 && w.rows % kPanelRows == 0;
}

void pack_quantized_panels(const WeightMatrix& w, uint8_t* out) {
  const bool affine = w.type == GgmlType::Q4_1;
  const size_t block_bytes = affine ? sizeof(BlockAffine4) : sizeof(BlockQ8_0);
  const size_t codes_offset = affine ? offsetof(BlockAffine4, nibbles) : offsetof(BlockQ8_0, q);
  const StoredPanelBlock stored = stored_panel_block(affine);
  const size_t blocks = w.cols / 32;
  for (size_t first = 0; first < w.rows; first += kPanelRows)
    for (size_t b = 0; b < blocks; ++b) {
      uint8_t* block = out + first * w.row_bytes + b * stored.bytes;
      for (size_t j = 0; j < kPanelRows; ++j) {
        const uint8_t* source = w.data + (first + j) * w.row_bytes + b * block_bytes;
        std::memcpy(block + 2 * j, source, 2);
        if (affine) std::memcpy(block + 32 + 2 * j, source + 2, 2);
        const uint8_t* codes = source + codes_offset;
        for (size_t g = 0; g < (affine ? 4u : 8u); ++g)
          for (size_t i = 0; i < 4; ++i)
            block[stored.codes_offset + 64 * g + 4 * j + i] =
                affine ? codes[4 * g + i] : static_cast<uint8_t>(codes[4 * g + i] ^ 0x80);
      }
    }
}

}  // namespace kipp::kernels::cpu
