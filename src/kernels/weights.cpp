#include "kernels/weights.h"

#include <algorithm>

namespace kipp::kernels {

WeightMatrix make_weight_matrix(GgmlType type, const uint8_t* data, size_t rows, size_t cols) {
  WeightMatrix w{type, data, rows, cols, 0};
  if (type == GgmlType::Q4_0) return w;
  const auto row_bytes = ggml_tensor_bytes(type, cols);
  if (row_bytes) w.row_bytes = static_cast<size_t>(*row_bytes);
  return w;
}

void fetch_kv_rows(const KvLayerView& view, size_t positions) {
  constexpr size_t kLineBytes = 64;
  const size_t row_bytes = view.kv_heads * view.head_dim * sizeof(uint16_t);
  for (size_t first = 0; first < positions; first += kKvBlockPositions) {
    const size_t count = std::min(kKvBlockPositions, positions - first);
    const size_t span = (count - 1) * view.position_stride * sizeof(uint16_t) + row_bytes;
    const uint16_t* block = view.blocks[first / kKvBlockPositions];
    for (const uint16_t* start : {block + view.k_offset, block + view.v_offset}) {
      const auto* bytes = reinterpret_cast<const char*>(start);
      // Locality 2: into L2 (prefetcht1 on x86), as the attention kernels' own requests.
      for (size_t line = 0; line < span; line += kLineBytes) __builtin_prefetch(bytes + line, 0, 2);
    }
  }
}

}  // namespace kipp::kernels
