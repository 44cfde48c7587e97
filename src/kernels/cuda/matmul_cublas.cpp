#include "kernels/cuda/matmul_cublas.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/launch_status.h"
#include "kernels/cuda/matmul_kernels.h"

namespace kipp::cuda {
namespace {

// The workspace cuBLASLt may use per product: what NVIDIA suggests for Hopper's kernels.
constexpr uint64_t kWorkspaceBytes = uint64_t{32} << 20;

// The largest power of two up to 256 dividing the address and the leading dimension's bytes:
// what the algorithm may assume of every column this operand starts.
uint32_t alignment(const void* pointer, uint64_t ld_bytes) {
  const uint64_t both = reinterpret_cast<uintptr_t>(pointer) | ld_bytes | 256;
  return static_cast<uint32_t>(both & (~both + 1));
}

}  // namespace

// Row-major data seen by column-major cuBLASLt. The weights W (outputs x cols, row-major) are,
// read column-major, the cols x outputs matrix W^T with leading dimension cols; the inputs X
// (rows x cols) likewise are X^T, cols x rows; the output Y (rows x outputs, row stride
// out_stride) is Y^T, outputs x rows with leading dimension out_stride. Y = X W^T is Y^T = W X^T,
// so D (outputs x rows) = op(A) B with A = the W^T view transposed (op T: outputs x cols) and
// B = the X^T view as it is (cols x rows): m = outputs, n = rows, k = cols.
struct CublasProducts::Plan {
  const CublasLt* lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  ~Plan() {
    if (c != nullptr) lt->matrix_layout_destroy(c);
    if (b != nullptr) lt->matrix_layout_destroy(b);
    if (a != nullptr) lt->matrix_layout_destroy(a);
    if (desc != nullptr) lt->matmul_desc_destroy(desc);
  }
};

CublasProducts::CublasProducts(const CublasLt* lt, cublasLtHandle_t handle) : lt_(lt), handle_(handle) {}

Expected<std::unique_ptr<CublasProducts>> CublasProducts::create(uint64_t swiglu_floats) {
  KIPP_ASSIGN_OR_RETURN(const CublasLt* lt, cublas_lt());
  cublasLtHandle_t handle = nullptr;
  KIPP_RETURN_IF_ERROR(lt->check(lt->create(&handle), "cublasLtCreate"));
  std::unique_ptr<CublasProducts> products(new CublasProducts(lt, handle));
  const auto allocate = [](void** p, uint64_t bytes, const std::string& what) -> Status {
    if (const cudaError_t e = cudaMalloc(p, bytes); e != cudaSuccess) {
      cudaGetLastError();  // not sticky: cleared so that the next launch does not report it as its own
      return make_error("cannot allocate " + what + " (" + std::to_string(bytes >> 20) +
                        " MiB) on the GPU: " + cudaGetErrorString(e));
    }
    return ok_status();
  };
  KIPP_RETURN_IF_ERROR(allocate(&products->workspace_, kWorkspaceBytes, "cuBLASLt's workspace"));
  products->workspace_bytes_ = kWorkspaceBytes;
  const uint64_t scratch_bytes = std::max<uint64_t>(swiglu_floats, 1) * sizeof(float);
  KIPP_RETURN_IF_ERROR(
      allocate(reinterpret_cast<void**>(&products->scratch_), scratch_bytes, "the SwiGlu products' scratch"));
  products->scratch_bytes_ = scratch_bytes;
  return products;
}

CublasProducts::~CublasProducts() {
  plans_.clear();
  cudaFree(scratch_);
  cudaFree(workspace_);
  lt_->destroy(handle_);
}

Expected<const CublasProducts::Plan*> CublasProducts::plan(const Shape& shape) {
  if (const auto found = plans_.find(shape); found != plans_.end()) return found->second.get();
  const auto [outputs, rows, cols, out_stride, align_w, align_x, align_out] = shape;
  auto p = std::make_unique<Plan>();
  p->lt = lt_;
  const CublasLt& lt = *lt_;
  KIPP_RETURN_IF_ERROR(
      lt.check(lt.matmul_desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate"));
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  KIPP_RETURN_IF_ERROR(
      lt.check(lt.matmul_desc_set_attribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose),
               "cublasLtMatmulDescSetAttribute(TRANSA)"));
  KIPP_RETURN_IF_ERROR(lt.check(lt.matmul_desc_set_attribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep),
                                "cublasLtMatmulDescSetAttribute(TRANSB)"));
  KIPP_RETURN_IF_ERROR(
      lt.check(lt.matrix_layout_create(&p->a, CUDA_R_16BF, cols, outputs, cols), "cublasLtMatrixLayoutCreate(A)"));
  KIPP_RETURN_IF_ERROR(
      lt.check(lt.matrix_layout_create(&p->b, CUDA_R_16BF, cols, rows, cols), "cublasLtMatrixLayoutCreate(B)"));
  KIPP_RETURN_IF_ERROR(
      lt.check(lt.matrix_layout_create(&p->c, CUDA_R_32F, outputs, rows, out_stride), "cublasLtMatrixLayoutCreate(C)"));

  cublasLtMatmulPreference_t preference = nullptr;
  KIPP_RETURN_IF_ERROR(lt.check(lt.preference_create(&preference), "cublasLtMatmulPreferenceCreate"));
  const uint64_t workspace = workspace_bytes_;
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_w},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_x},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_out},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_out}};
  Status set = lt.check(
      lt.preference_set_attribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace),
      "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  for (const auto& [attribute, bytes] : alignments)
    if (set.ok())
      set = lt.check(lt.preference_set_attribute(preference, attribute, &bytes, sizeof bytes),
                     "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (set.ok())
    set = lt.check(lt.algo_get_heuristic(handle_, p->desc, p->a, p->b, p->c, p->c, preference, 1, &result, &found),
                   "cublasLtMatmulAlgoGetHeuristic");
  lt.preference_destroy(preference);
  KIPP_RETURN_IF_ERROR(set);
  if (found == 0)
    return make_error("cuBLASLt has no BF16 algorithm for " + std::to_string(rows) + " rows x " +
                      std::to_string(outputs) + " outputs x " + std::to_string(cols) + " columns");
  p->algo = result.algo;
  return plans_.emplace(shape, std::move(p)).first->second.get();
}

Status CublasProducts::product(const DeviceMatrix& w, const DeviceInput& in, float* out, uint32_t out_stride,
                               float beta, cudaStream_t stream) {
  const uint64_t in_ld_bytes = uint64_t{in.cols} * sizeof(uint16_t);
  const Shape shape{w.rows,
                    in.rows,
                    w.cols,
                    out_stride,
                    alignment(w.data, w.row_bytes),
                    alignment(in.bf16, in_ld_bytes),
                    alignment(out, uint64_t{out_stride} * sizeof(float))};
  KIPP_ASSIGN_OR_RETURN(const Plan* p, plan(shape));
  const float alpha = 1.0f;
  return lt_->check(lt_->matmul(handle_, p->desc, &alpha, w.data, p->a, in.bf16, p->b, &beta, out, p->c, out, p->c,
                                &p->algo, workspace_, workspace_bytes_, stream),
                    "cublasLtMatmul");
}

Status CublasProducts::swiglu(const DeviceMatrix& w, const DeviceMatrix& up, const DeviceInput& in, float* out,
                              uint32_t out_stride, cudaStream_t stream) {
  if (uint64_t{in.rows} * w.rows * sizeof(float) > scratch_bytes_)
    return make_error("a SwiGlu product of " + std::to_string(in.rows) + " rows x " + std::to_string(w.rows) +
                      " outputs exceeds the scratch its CUDA matmul context was created for");
  KIPP_RETURN_IF_ERROR(product(w, in, out, out_stride, 0.0f, stream));
  KIPP_RETURN_IF_ERROR(product(up, in, scratch_, w.rows, 0.0f, stream));
  return launch_swiglu(out, out_stride, scratch_, in.rows, w.rows, stream);
}

}  // namespace kipp::cuda
