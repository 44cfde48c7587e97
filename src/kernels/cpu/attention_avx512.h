// Attention for CPUs with AVX-512 (the products in FP32 FMA): a tile of query rows of one
// sequence against one kv head, streaming over K/V blocks with an online softmax.
#pragma once

#include "kernels/weights.h"

namespace kipp::kernels::avx512 {

// ref::attention_rows's contract, for head_dim 32, 64, 128 or 256 (others go to the portable
// kernel). Every query is computed the same way whichever other rows share its tile:
// K and V of a block are widened to FP32 once per tile, each score is a fixed sequence of
// 16-lane FMAs summed by a fixed tree, the softmax is updated block by block.
void attention_rows(const float* q, size_t q_stride, size_t rows, size_t first_position, size_t group,
                    const KvLayerView& kv, float scale, float* scratch, float* out, size_t out_stride);

}  // namespace kipp::kernels::avx512
