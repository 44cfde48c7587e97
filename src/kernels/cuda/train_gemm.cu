#include "kernels/cuda/train_gemm.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace kipp::cuda::train {
namespace {

Status cuda_status(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return ok_status();
  return make_error(std::string(call) + ": " + cudaGetErrorString(error));
}

// The largest power of two up to 256 that divides the address.
uint32_t alignment_of(const void* pointer) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t bytes = 256;
  while (bytes > 1 && address % bytes != 0) bytes /= 2;
  return bytes;
}

}  // namespace

Expected<std::unique_ptr<TrainGemm>> TrainGemm::create(cudaStream_t stream, size_t workspace_bytes) {
  KIPP_ASSIGN_OR_RETURN(const CublasLt* lt, cublas_lt());
  cublasLtHandle_t handle = nullptr;
  KIPP_RETURN_IF_ERROR(lt->check(lt->create(&handle), "cublasLtCreate"));
  void* workspace = nullptr;
  if (const cudaError_t e = cudaMalloc(&workspace, workspace_bytes); e != cudaSuccess) {
    lt->destroy(handle);
    return make_error(std::string("cannot allocate the cuBLASLt workspace: ") + cudaGetErrorString(e));
  }
  return std::unique_ptr<TrainGemm>(new TrainGemm(lt, handle, stream, workspace, workspace_bytes));
}

TrainGemm::~TrainGemm() {
  for (auto& [key, plan] : plans_) destroy(plan);
  cudaFree(workspace_);
  lt_->destroy(handle_);
}

void TrainGemm::destroy(Plan& plan) {
  if (plan.a) lt_->matrix_layout_destroy(plan.a);
  if (plan.b) lt_->matrix_layout_destroy(plan.b);
  if (plan.c) lt_->matrix_layout_destroy(plan.c);
  if (plan.desc) lt_->matmul_desc_destroy(plan.desc);
  plan = Plan{};
}

Status TrainGemm::build(Plan& p, const Operands& o, size_t m, size_t n, size_t k, Alignments alignments) {
  KIPP_RETURN_IF_ERROR(
      lt_->check(lt_->matmul_desc_create(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate"));
  KIPP_RETURN_IF_ERROR(
      lt_->check(lt_->matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &o.trans_a, sizeof o.trans_a),
                 "cublasLtMatmulDescSetAttribute(TRANSA)"));
  KIPP_RETURN_IF_ERROR(
      lt_->check(lt_->matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &o.trans_b, sizeof o.trans_b),
                 "cublasLtMatmulDescSetAttribute(TRANSB)"));
  KIPP_RETURN_IF_ERROR(lt_->check(lt_->matrix_layout_create(&p.a, CUDA_R_16BF, o.a_rows, o.a_cols, int64_t(o.a_rows)),
                                  "cublasLtMatrixLayoutCreate(A)"));
  KIPP_RETURN_IF_ERROR(lt_->check(lt_->matrix_layout_create(&p.b, CUDA_R_16BF, o.b_rows, o.b_cols, int64_t(o.b_rows)),
                                  "cublasLtMatrixLayoutCreate(B)"));
  KIPP_RETURN_IF_ERROR(lt_->check(lt_->matrix_layout_create(&p.c, CUDA_R_32F, o.d_rows, o.d_cols, int64_t(o.d_rows)),
                                  "cublasLtMatrixLayoutCreate(C)"));
  cublasLtMatmulPreference_t preference = nullptr;
  KIPP_RETURN_IF_ERROR(lt_->check(lt_->preference_create(&preference), "cublasLtMatmulPreferenceCreate"));
  const uint64_t workspace = workspace_bytes_;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  // Only algorithms that accept the operands' actual alignment (C and D are one buffer).
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignment_limits[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignments.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignments.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignments.d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignments.d}};
  auto choose = [&]() -> Status {
    KIPP_RETURN_IF_ERROR(lt_->check(lt_->preference_set_attribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                  &workspace, sizeof workspace),
                                    "cublasLtMatmulPreferenceSetAttribute"));
    for (const auto& [attribute, bytes] : alignment_limits) {
      KIPP_RETURN_IF_ERROR(lt_->check(lt_->preference_set_attribute(preference, attribute, &bytes, sizeof bytes),
                                      "cublasLtMatmulPreferenceSetAttribute(alignment)"));
    }
    return lt_->check(lt_->algo_get_heuristic(handle_, p.desc, p.a, p.b, p.c, p.c, preference, 1, &result, &found),
                      "cublasLtMatmulAlgoGetHeuristic");
  };
  const Status chosen = choose();
  lt_->preference_destroy(preference);
  KIPP_RETURN_IF_ERROR(chosen);
  if (found == 0) {
    return make_error("cuBLASLt has no BF16 algorithm for a " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                      std::to_string(k) + " training product");
  }
  p.algo = result.algo;
  return ok_status();
}

TrainGemm::Operands TrainGemm::operands(Shape shape, size_t m, size_t n, size_t k) {
  switch (shape) {
    case Shape::Xwt:  // y^T[n, m] = (w^T)^T[n, k] x^T[k, m]
      return {CUBLAS_OP_T, CUBLAS_OP_N, k, n, k, m, n, m};
    case Shape::DyW:  // dx^T[k, m] = w^T[k, n] dy^T[n, m]
      return {CUBLAS_OP_N, CUBLAS_OP_N, k, n, n, m, k, m};
    case Shape::DytX:  // dw^T[k, n] = x^T[k, m] (dy^T)^T[m, n]
      break;
  }
  return {CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, m, k, n};
}

Expected<const TrainGemm::Plan*> TrainGemm::plan(Shape shape, size_t m, size_t n, size_t k, uint32_t align_a,
                                                 uint32_t align_b, uint32_t align_d) {
  const auto key = std::make_tuple(shape, m, n, k, align_a, align_b, align_d);
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  constexpr size_t kMaxDim = size_t(std::numeric_limits<int32_t>::max());
  if (m == 0 || n == 0 || k == 0 || m > kMaxDim || n > kMaxDim || k > kMaxDim)
    return make_error("a training product of shape " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                      std::to_string(k) + " is empty or too large for cuBLASLt");
  const Operands o = operands(shape, m, n, k);
  Plan p;
  const Status built = build(p, o, m, n, k, {align_a, align_b, align_d});
  if (!built.ok()) {
    destroy(p);
    return make_error(built.message());
  }
  return &plans_.emplace(key, p).first->second;
}

Status TrainGemm::run(Shape shape, size_t m, size_t n, size_t k, const void* a, const void* b, float beta, float* d) {
  KIPP_ASSIGN_OR_RETURN(const Plan* p, plan(shape, m, n, k, alignment_of(a), alignment_of(b), alignment_of(d)));
  const float alpha = 1.0f;
  KIPP_RETURN_IF_ERROR(lt_->check(lt_->matmul(handle_, p->desc, &alpha, a, p->a, b, p->b, &beta, d, p->c, d, p->c,
                                              &p->algo, workspace_, workspace_bytes_, stream_),
                                  "cublasLtMatmul"));
  return cuda_status(cudaGetLastError(), "cublasLtMatmul launch");
}

Status TrainGemm::xwt(const __nv_bfloat16* x, const __nv_bfloat16* w, size_t m, size_t n, size_t k, float beta,
                      float* y) {
  return run(Shape::Xwt, m, n, k, w, x, beta, y);
}

Status TrainGemm::dy_w(const __nv_bfloat16* dy, const __nv_bfloat16* w, size_t m, size_t n, size_t k, float beta,
                       float* dx) {
  return run(Shape::DyW, m, n, k, w, dy, beta, dx);
}

Status TrainGemm::dyt_x(const __nv_bfloat16* dy, const __nv_bfloat16* x, size_t m, size_t n, size_t k, float* dw) {
  return run(Shape::DytX, m, n, k, x, dy, 1.0f, dw);
}

}  // namespace kipp::cuda::train
