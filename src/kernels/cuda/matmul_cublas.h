// BF16 products of many rows on the tensor cores through cuBLASLt: the handle, its workspace,
// the scratch of the SwiGlu epilogue, and one plan (descriptors and algorithm) per shape.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "core/status.h"
#include "kernels/cuda/cublas_lt.h"
#include "kernels/cuda/matmul.h"

namespace kipp::cuda {

class CublasProducts {
 public:
  // Opens cuBLASLt (kernels/cuda/cublas_lt.h) and allocates its workspace and the SwiGlu
  // scratch of `swiglu_floats` (the most rows x outputs a SwiGlu product may have).
  static Expected<std::unique_ptr<CublasProducts>> create(uint64_t swiglu_floats);
  ~CublasProducts();
  CublasProducts(const CublasProducts&) = delete;
  CublasProducts& operator=(const CublasProducts&) = delete;

  // out = w . in (beta 0) or out += w . in (beta 1), FP32 sums and results.
  Status product(const DeviceMatrix& w, const DeviceInput& in, float* out, uint32_t out_stride, float beta,
                 cudaStream_t stream);
  // out = silu(w . in) * (up . in): the gate product into out, the up product into the scratch
  // (an error when rows x outputs exceed it).
  Status swiglu(const DeviceMatrix& w, const DeviceMatrix& up, const DeviceInput& in, float* out, uint32_t out_stride,
                cudaStream_t stream);

  uint64_t device_bytes() const { return workspace_bytes_ + scratch_bytes_; }

 private:
  struct Plan;
  // outputs, rows, cols, out_stride and the alignments of weights, inputs and outputs
  using Shape = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>;

  CublasProducts(const CublasLt* lt, cublasLtHandle_t handle);
  Expected<const Plan*> plan(const Shape& shape);

  const CublasLt* lt_;
  cublasLtHandle_t handle_;
  void* workspace_ = nullptr;
  uint64_t workspace_bytes_ = 0;
  float* scratch_ = nullptr;  // the up product of a SwiGlu
  uint64_t scratch_bytes_ = 0;
  std::map<Shape, std::unique_ptr<Plan>> plans_;
};

}  // namespace kipp::cuda
