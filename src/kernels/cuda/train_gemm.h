// The three products of a linear layer's training step on the tensor cores: BF16 operands,
// FP32 accumulation and FP32 outputs, row-major with PyTorch's [out, in] weights, the same three
// shapes as train/linear_products.h. cuBLASLt comes through kernels/cuda/cublas_lt.h; the
// algorithm of each shape and operand alignment is chosen once and reused, so a product always
// runs the same kernel and gives the same bits. Operands may start anywhere in a buffer of their
// element type.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "core/status.h"
#include "kernels/cuda/cublas_lt.h"

namespace kipp::cuda::train {

class TrainGemm {
 public:
  // Products on `stream`, with a cuBLASLt workspace of workspace_bytes.
  static Expected<std::unique_ptr<TrainGemm>> create(cudaStream_t stream, size_t workspace_bytes = size_t(32) << 20);
  ~TrainGemm();
  TrainGemm(const TrainGemm&) = delete;
  TrainGemm& operator=(const TrainGemm&) = delete;

  cudaStream_t stream() const { return stream_; }

  // y[m, n] = x[m, k] w[n, k]^T + beta * y.
  Status xwt(const __nv_bfloat16* x, const __nv_bfloat16* w, size_t m, size_t n, size_t k, float beta, float* y);
  // dx[m, k] = dy[m, n] w[n, k] + beta * dx.
  Status dy_w(const __nv_bfloat16* dy, const __nv_bfloat16* w, size_t m, size_t n, size_t k, float beta, float* dx);
  // dw[n, k] += dy[m, n]^T x[m, k].
  Status dyt_x(const __nv_bfloat16* dy, const __nv_bfloat16* x, size_t m, size_t n, size_t k, float* dw);

  enum class Shape { Xwt, DyW, DytX };
  // A product's operands in cuBLASLt's column-major view of our row-major buffers (a row-major
  // [r, c] matrix is a column-major [c, r] one with leading dimension c), each with leading
  // dimension its row count: A is w for xwt and dy_w and x for dyt_x, B is x, dy and dy.
  struct Operands {
    cublasOperation_t trans_a, trans_b;
    uint64_t a_rows, a_cols, b_rows, b_cols, d_rows, d_cols;
  };
  static Operands operands(Shape shape, size_t m, size_t n, size_t k);

 private:
  // One product in cuBLASLt's column-major terms: D[rows, cols] = op(A) op(B) (+ beta C).
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  TrainGemm(const CublasLt* lt, cublasLtHandle_t handle, cudaStream_t stream, void* workspace, size_t workspace_bytes)
      : lt_(lt), handle_(handle), stream_(stream), workspace_(workspace), workspace_bytes_(workspace_bytes) {}
  // The operands' address alignments in bytes (powers of two up to 256): an algorithm is chosen
  // per shape and alignment, since the fastest ones need 16-byte aligned operands.
  struct Alignments {
    uint32_t a, b, d;
  };
  Expected<const Plan*> plan(Shape shape, size_t m, size_t n, size_t k, uint32_t align_a, uint32_t align_b,
                             uint32_t align_d);
  Status build(Plan& plan, const Operands& operands, size_t m, size_t n, size_t k, Alignments alignments);
  Status run(Shape shape, size_t m, size_t n, size_t k, const void* a, const void* b, float beta, float* d);
  void destroy(Plan& plan);

  const CublasLt* lt_;
  cublasLtHandle_t handle_;
  cudaStream_t stream_;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<std::tuple<Shape, size_t, size_t, size_t, uint32_t, uint32_t, uint32_t>, Plan> plans_;
};

}  // namespace kipp::cuda::train
