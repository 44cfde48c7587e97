// The host-side decisions of the CUDA products, apart from any device code so that they are
// unit-tested without a GPU: which kernel a product takes, and what makes its arguments invalid.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/matmul.h"

namespace kipp::cuda {

// Up to this many input rows a product streams every weight once for all rows (the decode
// kernels keep one FP32 sum per row in registers, so the weight read stays the whole cost: at
// 8 rows a BF16 weight pair feeds 16 multiply-adds, still far below what the SMs do while HBM
// delivers it). More rows go to the tensor cores (BF16, cuBLASLt) or the tiled int8 kernel, which
// read each weight once per tile of rows.
inline constexpr uint32_t kDecodeRows = 8;

enum class MatmulPath { Bf16Decode, Bf16Cublas, QuantDecode, QuantTiled };

// The path matmul() takes for weights of `type` (BF16, Q8_0, Q4_1) and `rows` input rows.
MatmulPath matmul_path(GgmlType type, uint32_t rows);

// Bytes of one stored row of `cols` values of `type`, or 0 for a type the products do not take
// or cols not a whole number of 32-value blocks.
uint64_t weight_row_bytes(GgmlType type, uint32_t cols);

// Every argument rule of matmul() that needs no device: types, shapes, formats, pointers and
// their alignment, the epilogue's `up`, and the context's limits.
Status check_matmul_arguments(const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, const float* out,
                              uint32_t out_stride, Epilogue epilogue, uint32_t max_rows, uint32_t max_outputs);

}  // namespace kipp::cuda
