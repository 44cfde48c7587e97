#include "kernels/weights.h"

namespace kipp::kernels {

WeightMatrix make_weight_matrix(GgmlType type, const uint8_t* data, size_t rows, size_t cols) {
  WeightMatrix w{type, data, rows, cols, 0};
  if (type == GgmlType::Q4_0) return w;
  const auto row_bytes = ggml_tensor_bytes(type, cols);
  if (row_bytes) w.row_bytes = static_cast<size_t>(*row_bytes);
  return w;
}

}  // namespace kipp::kernels
