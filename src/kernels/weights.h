// A weight matrix as the kernels see it: row-major, `rows` output features of `cols` inputs,
// stored in one of the element types a Kipp GGUF may hold. Kernels know nothing of models.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/ggml_types.h"

namespace kipp::kernels {

struct WeightMatrix {
  GgmlType type = GgmlType::F32;  // F32, F16, BF16, Q8_0 or Q4_1 (affine4)
  const uint8_t* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;
  size_t row_bytes = 0;  // bytes of one row in `type`
  // Rows rearranged in panels of 16 by the kernel table's pack_weights; only that table's matmul
  // reads them. A range of whole panels is still at data + first_row * row_bytes.
  bool panels = false;
};

// The view of one matrix, or row_bytes == 0 when `type` is not one the kernels handle or
// `cols` is not a whole number of its blocks.
WeightMatrix make_weight_matrix(GgmlType type, const uint8_t* data, size_t rows, size_t cols);

// One layer of a paged K/V cache. Every block holds kKvBlockPositions positions: in a block,
// the key of position t (counted within the block) for the view's kv head h is head_dim BF16
// at k_offset + t * position_stride + h * head_dim, its value likewise from v_offset. The CPU
// backend keeps each kv head's rows of a block together and views one head at a time
// (position_stride = head_dim); position-major views of several heads (position_stride =
// kv_heads * head_dim) read the same way.
struct KvLayerView {
  const uint16_t* const* blocks = nullptr;  // logical block -> its storage
  size_t k_offset = 0;
  size_t v_offset = 0;
  size_t kv_heads = 0;
  size_t head_dim = 0;
  size_t position_stride = 0;
};

inline constexpr size_t kKvBlockPositions = 32;

// Requests the K and V rows of positions [0, positions) of `view` into L2 without waiting for
// them. Attention over a short context is bound by the latency of its rows, not by bandwidth:
// a thread that asks for its next work item's rows before it starts on the current one finds
// them in cache (bench/attention_bench and `kipp bench` batches show the gain).
void fetch_kv_rows(const KvLayerView& view, size_t positions);

}  // namespace kipp::kernels
