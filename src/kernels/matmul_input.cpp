#include "kernels/matmul_input.h"

namespace kipp::kernels {

InputFormat input_format(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::BF16:
      return InputFormat::BF16;
    case GgmlType::Q8_0:
    case GgmlType::Q4_1:
    case GgmlType::Q4_0:
      return InputFormat::Q8;
    case GgmlType::F32:
    case GgmlType::F16:
      break;
  }
  return InputFormat::F32;
}

size_t prepared_input_bytes(InputFormat format, size_t rows, size_t cols) {
  switch (format) {
    case InputFormat::F32:
      return 0;
    case InputFormat::BF16:
      return rows * cols * sizeof(uint16_t);
    case InputFormat::Q8:
      // codes, then three per-block arrays of 4-byte values (aligned: cols is a multiple of 32)
      return rows * cols + 3 * (rows * cols / kInputBlock) * sizeof(float);
  }
  return 0;
}

}  // namespace kipp::kernels
