#include "kernels/cuda/train_head.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/train_reduce.cuh"

namespace kipp::cuda::train {
namespace {

constexpr uint32_t kThreads = 256;

Status launched(const char* what) {
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return make_error(std::string(what) + ": " + cudaGetErrorString(e));
  return ok_status();
}

// out[i] = rows[i] of x, rounded to BF16 (one block per row).
__global__ void gather_bf16_kernel(const float* x, const uint32_t* rows, uint32_t width, __nv_bfloat16* out) {
  const float* from = x + uint64_t(rows[blockIdx.x]) * width;
  __nv_bfloat16* to = out + uint64_t(blockIdx.x) * width;
  for (uint32_t i = threadIdx.x; i < width; i += blockDim.x) to[i] = __float2bfloat16_rn(from[i]);
}

// rows[i] of out = chunk row i.
__global__ void scatter_kernel(const float* chunk, const uint32_t* rows, uint32_t width, float* out) {
  const float* from = chunk + uint64_t(blockIdx.x) * width;
  float* to = out + uint64_t(rows[blockIdx.x]) * width;
  for (uint32_t i = threadIdx.x; i < width; i += blockDim.x) to[i] = from[i];
}

// One block per row: loss = max + log(sum exp(z - max)) - z[target]; with dlogits, the
// gradient grad_scale * (softmax - onehot) rounded to BF16.
__global__ void cross_entropy_kernel(const float* logits, const int32_t* targets, uint32_t vocab, float grad_scale,
                                     float* row_loss, __nv_bfloat16* dlogits) {
  __shared__ float shared[kThreads];
  const float* z = logits + uint64_t(blockIdx.x) * vocab;
  const uint32_t target = uint32_t(targets[blockIdx.x]);
  float max = -INFINITY;
  for (uint32_t j = threadIdx.x; j < vocab; j += blockDim.x) max = fmaxf(max, z[j]);
  max = block_max(max, shared);
  float sum = 0;
  for (uint32_t j = threadIdx.x; j < vocab; j += blockDim.x) sum = add(sum, fast_exp(sub(z[j], max)));
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) row_loss[blockIdx.x] = sub(add(max, logf(sum)), z[target]);
  if (dlogits == nullptr) return;
  const float factor = div(grad_scale, sum);
  __nv_bfloat16* d = dlogits + uint64_t(blockIdx.x) * vocab;
  for (uint32_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    float g = mul(fast_exp(sub(z[j], max)), factor);
    if (j == target) g = sub(g, grad_scale);
    d[j] = __float2bfloat16_rn(g);
  }
}

}  // namespace

Status head_cross_entropy(TrainGemm& gemm, const HeadProblem& p, const HeadScratch& scratch) {
  cudaStream_t stream = gemm.stream();
  const bool backward = p.weight_grad != nullptr;
  if (backward && p.d_normed == nullptr) return make_error("the head's backward needs d_normed");
  for (uint32_t start = 0; start < p.counted; start += kHeadChunkRows) {
    const uint32_t n = std::min(kHeadChunkRows, p.counted - start);
    gather_bf16_kernel<<<n, kThreads, 0, stream>>>(p.normed, p.counted_rows + start, p.hidden, scratch.input);
    KIPP_RETURN_IF_ERROR(launched("head input gather"));
    KIPP_RETURN_IF_ERROR(gemm.xwt(scratch.input, p.weight, n, p.vocab, p.hidden, 0.0f, scratch.logits));
    cross_entropy_kernel<<<n, kThreads, 0, stream>>>(scratch.logits, p.targets + start, p.vocab, p.grad_scale,
                                                     p.row_loss + start, backward ? scratch.dlogits : nullptr);
    KIPP_RETURN_IF_ERROR(launched("cross-entropy"));
    if (!backward) continue;
    KIPP_RETURN_IF_ERROR(gemm.dy_w(scratch.dlogits, p.weight, n, p.vocab, p.hidden, 0.0f, scratch.dinput));
    KIPP_RETURN_IF_ERROR(gemm.dyt_x(scratch.dlogits, scratch.input, n, p.vocab, p.hidden, p.weight_grad));
    scatter_kernel<<<n, kThreads, 0, stream>>>(scratch.dinput, p.counted_rows + start, p.hidden, p.d_normed);
    KIPP_RETURN_IF_ERROR(launched("head gradient scatter"));
  }
  return ok_status();
}

Status head_logits(TrainGemm& gemm, const float* normed, const uint32_t* rows, uint32_t count, uint32_t hidden,
                   uint32_t vocab, const __nv_bfloat16* weight, const HeadScratch& scratch, float* host_out) {
  cudaStream_t stream = gemm.stream();
  for (uint32_t start = 0; start < count; start += kHeadChunkRows) {
    const uint32_t n = std::min(kHeadChunkRows, count - start);
    gather_bf16_kernel<<<n, kThreads, 0, stream>>>(normed, rows + start, hidden, scratch.input);
    KIPP_RETURN_IF_ERROR(launched("head input gather"));
    KIPP_RETURN_IF_ERROR(gemm.xwt(scratch.input, weight, n, vocab, hidden, 0.0f, scratch.logits));
    const size_t bytes = size_t(n) * vocab * sizeof(float);
    if (const cudaError_t e =
            cudaMemcpyAsync(host_out + size_t(start) * vocab, scratch.logits, bytes, cudaMemcpyDeviceToHost, stream);
        e != cudaSuccess)
      return make_error(std::string("logits download: ") + cudaGetErrorString(e));
    // The next chunk overwrites the scratch logits.
    if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
      return make_error(std::string("logits: ") + cudaGetErrorString(e));
  }
  return ok_status();
}

}  // namespace kipp::cuda::train
