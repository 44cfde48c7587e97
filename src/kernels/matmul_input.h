// The input side of a matrix product. The input rows are prepared once per step, for every
// matrix that reads them, in the format the kernel table asks for (KernelTable::input_format),
// so a row's result never depends on which other rows share the step. The reference table
// multiplies the floats themselves (F32 inputs for every weight type), the FP32-activation
// forward pass the oracle must be. The fast tables round them first, in the format input_format
// below gives the weight type: on the same prepared values the reference (ref::matmul takes every
// format) and each SIMD variant then differ, for BF16, only in the order their float sums are
// added, and for quantized weights not at all (ref/q8_rows.h fixes the order).
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/ggml_types.h"

namespace kipp::kernels {

enum class InputFormat { F32, BF16, Q8 };

// The format the fast tables prepare for `weight_type`:
//   F32, F16 weights   -> F32 inputs, unchanged
//   BF16 weights       -> BF16 inputs, rounded to nearest even (each product is exact in FP32,
//                         which is what lets AVX512-BF16 multiply two BF16 vectors at once)
//   Q8_0, Q4_1 weights -> Q8 inputs: per block of 32, an FP32 scale d = max|x| / 127 and codes
//                         q = round-to-even(x / d) in [-127, 127] (integer block sums are exact)
InputFormat input_format(GgmlType weight_type);

inline constexpr size_t kInputBlock = 32;

// A view of `rows` prepared rows of `cols` values (cols a multiple of 32 for Q8), over storage
// that a kernel table's prepare_rows fills (products only read it).
struct PreparedInput {
  InputFormat format = InputFormat::F32;
  size_t rows = 0;
  size_t cols = 0;
  // The caller's floats, row r at f32 + r * f32_stride: what F32 products read, and what BF16
  // and Q8 rows are prepared from.
  const float* f32 = nullptr;
  size_t f32_stride = 0;
  uint16_t* bf16 = nullptr;        // BF16: rows * cols
  int8_t* q8 = nullptr;            // Q8: rows * cols codes
  float* q8_scale = nullptr;       // Q8: rows * cols / 32 scales d
  int32_t* q8_sum = nullptr;       // Q8: rows * cols / 32 code sums
  float* q8_scaled_sum = nullptr;  // Q8: rows * cols / 32 values d * (code sum), in FP32
};

// Bytes of storage `rows` x `cols` in `format` take (0 for F32).
size_t prepared_input_bytes(InputFormat format, size_t rows, size_t cols);

// The view of `rows` rows of `cols` floats (row r at x + r * x_stride) prepared in `format` into
// storage (prepared_input_bytes of it, 4-byte aligned), with nothing prepared yet. Each row's
// values have their own place, so the rows can be prepared in any split (by several threads).
PreparedInput input_layout(InputFormat format, const float* x, size_t rows, size_t x_stride, size_t cols,
                           void* storage);

}  // namespace kipp::kernels
