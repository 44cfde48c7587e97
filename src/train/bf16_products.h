// The training products with BF16 operands and FP32 accumulation (`train.precision: bf16`):
// every operand is rounded to BF16 (to nearest even), each pair product is then exact in FP32 and
// the sums are FP32, through the CPU kernel table's BF16 products (VDPBF16PS or AMX tiles where
// the CPU has them, the same math widened to FP32 elsewhere).
#pragma once

#include <memory>

#include "kernels/cpu/kernels.h"
#include "train/linear_products.h"

namespace kipp::train {

// The products through `kernels`' matmul. Each one is split over the OpenMP threads by whole
// 16-row panels of its packed operand; an element's value does not depend on the thread count.
// Operands are rounded and packed per call (weights change every step) into buffers that grow to
// the largest product and are kept.
std::unique_ptr<LinearProducts> make_bf16_products(const kernels::KernelTable& kernels);

}  // namespace kipp::train
