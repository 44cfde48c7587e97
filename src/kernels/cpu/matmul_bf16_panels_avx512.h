// BF16 weights packed as panels (bf16_panels.h) times BF16 inputs with AVX-512 BF16: each
// 64-byte line of a panel (16 outputs x one column pair) is multiplied by the input's pair
// broadcast to every lane, so the 16 outputs sum in their own lanes and need no reduction.
// Decoding reads each panel as one sequential stream, fetched ahead; prefill's rows stream past
// passes of panels that stay in L2.
#pragma once

#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels::avx512 {

// ref::matmul's contract for BF16 weights packed by pack_bf16_panels (w.panels), on a CPU with
// AVX-512 BF16. Every output has two FP32 accumulators, one for the even and one for the odd
// column pairs of each block, each adding its pair products (VDPBF16PS) in column order, summed
// at the end: a result never depends on the rows or panels computed beside it.
void bf16_panels_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride);

}  // namespace kipp::kernels::avx512
