#include "kernels/matmul_input.h"

namespace kipp::kernels {

InputFormat input_format(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::BF16: return InputFormat::BF16;
    case GgmlType::Q8_0:
    case GgmlType::Q4_1:
    case GgmlType::Q4_0: return InputFormat::Q8;
    case GgmlType::F32:
    case GgmlType::F16: break;
  }
  return InputFormat::F32;
}

size_t prepared_input_bytes(InputFormat format, size_t rows, size_t cols) {
  switch (format) {
    case InputFormat::F32: return 0;
    case InputFormat::BF16: return rows * cols * sizeof(uint16_t);
    case InputFormat::Q8:
      // codes, then three per-block arrays of 4-byte values (aligned: cols is a multiple of 32)
      return rows * cols + 3 * (rows * cols / kInputBlock) * sizeof(float);
  }
  return 0;
}

PreparedInput input_layout(InputFormat format, const float* x, size_t rows, size_t x_stride, size_t cols,
                           void* storage) {
  PreparedInput in;
  in.format = format;
  in.rows = rows;
  in.cols = cols;
  in.f32 = x;
  in.f32_stride = x_stride;
  if (format == InputFormat::BF16) {
    in.bf16 = static_cast<uint16_t*>(storage);
  } else if (format == InputFormat::Q8) {
    const size_t blocks = rows * cols / kInputBlock;
    in.q8 = static_cast<int8_t*>(storage);
    in.q8_scale = reinterpret_cast<float*>(in.q8 + rows * cols);
    in.q8_sum = reinterpret_cast<int32_t*>(in.q8_scale + blocks);
    in.q8_scaled_sum = reinterpret_cast<float*>(in.q8_sum + blocks);
  }
  return in;
}

}  // namespace kipp::kernels
