#include "kernels/cuda/matmul_plan.h"

#include <string>

#include "format/quant.h"
#include "kernels/cuda/matmul_math.h"

namespace kipp::cuda {
namespace {

bool aligned(const void* pointer, uintptr_t alignment) { return reinterpret_cast<uintptr_t>(pointer) % alignment == 0; }

// The alignment the kernels' widest loads of `type` need: 16-byte vectors of BF16 weights, the
// 4-byte words of affine4's 20-byte blocks, the 2-byte halves of Q8_0's 34-byte blocks.
uintptr_t weight_alignment(GgmlType type) {
  switch (type) {
    case GgmlType::BF16: return 16;
    case GgmlType::Q4_1: return 4;
    default: return 2;
  }
}

std::string describe(const char* name, const DeviceMatrix& m) {
  return std::string(name) + " (" + std::string(ggml_type_name(m.type)) + ", " + std::to_string(m.rows) + " x " +
         std::to_string(m.cols) + ")";
}

Status check_matrix(const char* name, const DeviceMatrix& m) {
  const uint64_t row_bytes = weight_row_bytes(m.type, m.cols);
  if (m.type != GgmlType::BF16 && m.type != GgmlType::Q8_0 && m.type != GgmlType::Q4_1)
    return make_error("CUDA matmul: " + describe(name, m) + " is not BF16, Q8_0 or Q4_1");
  if (m.rows == 0 || row_bytes == 0)
    return make_error("CUDA matmul: " + describe(name, m) + " has no rows or columns not a whole number of 32");
  if (m.row_bytes != row_bytes)
    return make_error("CUDA matmul: " + describe(name, m) + " has rows of " + std::to_string(m.row_bytes) +
                      " bytes, not " + std::to_string(row_bytes));
  if (m.data == nullptr || !aligned(m.data, weight_alignment(m.type)))
    return make_error("CUDA matmul: " + describe(name, m) + " has no data or data not " +
                      std::to_string(weight_alignment(m.type)) + "-byte aligned");
  return ok_status();
}

Status check_input(const DeviceInput& in, GgmlType weight_type) {
  const kernels::InputFormat wanted = kernels::input_format(weight_type);
  if (in.format != wanted)
    return make_error(std::string("CUDA matmul: ") + std::string(ggml_type_name(weight_type)) + " weights take " +
                      (wanted == kernels::InputFormat::BF16 ? "BF16" : "Q8") + " inputs");
  // Inputs are read as 16-byte vectors: 8 BF16 values or 16 codes of a 32-code block.
  const bool present = wanted == kernels::InputFormat::BF16
                           ? in.bf16 != nullptr && aligned(in.bf16, 16)
                           : in.q8 != nullptr && aligned(in.q8, 16) && in.q8_scale != nullptr &&
                                 in.q8_scaled_sum != nullptr && aligned(in.q8_scale, 4) && aligned(in.q8_scaled_sum, 4);
  if (!present) return make_error("CUDA matmul: the prepared input has no storage or storage not 16-byte aligned");
  return ok_status();
}

}  // namespace

MatmulPath matmul_path(GgmlType type, uint32_t rows) {
  const bool decode = rows <= kDecodeRows;
  if (type == GgmlType::BF16) return decode ? MatmulPath::Bf16Decode : MatmulPath::Bf16Cublas;
  return decode ? MatmulPath::QuantDecode : MatmulPath::QuantTiled;
}

uint64_t weight_row_bytes(GgmlType type, uint32_t cols) {
  if (cols == 0 || cols % math::kBlock != 0) return 0;
  const uint64_t blocks = cols / math::kBlock;
  switch (type) {
    case GgmlType::BF16: return uint64_t{cols} * sizeof(uint16_t);
    case GgmlType::Q8_0: return blocks * sizeof(BlockQ8_0);
    case GgmlType::Q4_1: return blocks * sizeof(BlockAffine4);
    default: return 0;
  }
}

Status check_matmul_arguments(const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, const float* out,
                              uint32_t out_stride, Epilogue epilogue, uint32_t max_rows, uint32_t max_outputs) {
  KIPP_RETURN_IF_ERROR(check_matrix("w", w));
  if (epilogue == Epilogue::SwiGlu) {
    if (up == nullptr) return make_error("CUDA matmul: SwiGlu needs the up projection");
    KIPP_RETURN_IF_ERROR(check_matrix("up", *up));
    if (up->type != w.type || up->rows != w.rows || up->cols != w.cols)
      return make_error("CUDA matmul: " + describe("up", *up) + " differs from " + describe("w", w));
  } else if (up != nullptr) {
    return make_error("CUDA matmul: an up projection is only taken by SwiGlu");
  }
  if (in.cols != w.cols)
    return make_error("CUDA matmul: the input has " + std::to_string(in.cols) + " columns, " + describe("w", w) +
                      " takes " + std::to_string(w.cols));
  if (in.rows == 0) return make_error("CUDA matmul: the input has no rows");
  KIPP_RETURN_IF_ERROR(check_input(in, w.type));
  if (in.rows > max_rows || w.rows > max_outputs)
    return make_error("CUDA matmul: " + std::to_string(in.rows) + " rows x " + std::to_string(w.rows) +
                      " outputs exceed the context's " + std::to_string(max_rows) + " x " +
                      std::to_string(max_outputs));
  if (out == nullptr || !aligned(out, alignof(float)))
    return make_error("CUDA matmul: the output has no storage or storage not 4-byte aligned");
  if (out_stride < w.rows)
    return make_error("CUDA matmul: output stride " + std::to_string(out_stride) + " is below the " +
                      std::to_string(w.rows) + " outputs of a row");
  return ok_status();
}

}  // namespace kipp::cuda
