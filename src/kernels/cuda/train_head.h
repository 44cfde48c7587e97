// The output head and its cross-entropy, fused and chunked: kHeadChunkRows of the counted rows
// at a time go through the BF16 head product into FP32 logits, the softmax, loss and logit
// gradient of each row are computed from them in one kernel (the gradient straight to BF16 for
// the backward products), so only one chunk's logits ever exist.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/train_gemm.h"

namespace kipp::cuda::train {

inline constexpr uint32_t kHeadChunkRows = 256;

// Device buffers of one chunk, each from its own allocation (the products need aligned operands).
struct HeadScratch {
  __nv_bfloat16* input = nullptr;    // [kHeadChunkRows, hidden]
  float* logits = nullptr;           // [kHeadChunkRows, vocab]
  __nv_bfloat16* dlogits = nullptr;  // [kHeadChunkRows, vocab]
  float* dinput = nullptr;           // [kHeadChunkRows, hidden]
};

struct HeadProblem {
  const float* normed = nullptr;           // [rows, hidden] the final norm's output
  const uint32_t* counted_rows = nullptr;  // [counted] the rows that carry loss
  const int32_t* targets = nullptr;        // [counted] their next tokens, each < vocab
  uint32_t counted = 0;
  uint32_t hidden = 0;
  uint32_t vocab = 0;
  const __nv_bfloat16* weight = nullptr;  // [vocab, hidden] the head (the embedding when tied)
  float* row_loss = nullptr;              // [counted] natural-log cross-entropy per row
  // Backward, when weight_grad is set: logits' gradient grad_scale * (softmax - onehot),
  // weight_grad [vocab, hidden] += its product with the input, and d_normed's counted rows
  // written with the input's gradient (the others are left as they are).
  float grad_scale = 1.0f;
  float* weight_grad = nullptr;
  float* d_normed = nullptr;
};

// On the products' stream.
Status head_cross_entropy(TrainGemm& gemm, const HeadProblem& problem, const HeadScratch& scratch);

// The logits of rows[0, count) of `normed` [*, hidden] through the BF16 head, chunk by chunk into
// host_out [count, vocab] (host memory); returns when they are there.
Status head_logits(TrainGemm& gemm, const float* normed, const uint32_t* rows, uint32_t count, uint32_t hidden,
                   uint32_t vocab, const __nv_bfloat16* weight, const HeadScratch& scratch, float* host_out);

}  // namespace kipp::cuda::train
