// The context and the dispatch of matmul(): arguments checked on the host (matmul_plan.h), then
// the path of matmul_path() for the weight type and row count.
#include "kernels/cuda/matmul.h"

#include <string>

#include "kernels/cuda/matmul_cublas.h"
#include "kernels/cuda/matmul_kernels.h"
#include "kernels/cuda/matmul_plan.h"

namespace kipp::cuda {
namespace {

class Context final : public MatmulContext {
 public:
  Context(uint32_t max_rows, uint32_t max_outputs, std::unique_ptr<CublasProducts> cublas)
      : max_rows_(max_rows), max_outputs_(max_outputs), cublas_(std::move(cublas)) {}
  uint64_t device_bytes() const override { return cublas_ != nullptr ? cublas_->device_bytes() : 0; }

  uint32_t max_rows_;
  uint32_t max_outputs_;
  std::unique_ptr<CublasProducts> cublas_;  // only for contexts of more rows than the decode paths take
};

}  // namespace

Expected<std::unique_ptr<MatmulContext>> create_matmul_context(uint32_t max_rows, uint32_t max_outputs,
                                                               uint32_t max_swiglu_outputs) {
  if (max_rows == 0 || max_outputs == 0) return make_error("a CUDA matmul context needs at least one row and output");
  if (max_swiglu_outputs == 0 || max_swiglu_outputs > max_outputs) max_swiglu_outputs = max_outputs;
  std::unique_ptr<CublasProducts> cublas;
  if (max_rows > kDecodeRows) {
    auto created = CublasProducts::create(uint64_t{max_rows} * max_swiglu_outputs);
    if (!created.ok()) return make_error("CUDA BF16 products of many rows: " + created.message());
    cublas = std::move(created).value();
  }
  return std::unique_ptr<MatmulContext>(new Context(max_rows, max_outputs, std::move(cublas)));
}

Status matmul(MatmulContext& context, const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, float* out,
              uint32_t out_stride, Epilogue epilogue, cudaStream_t stream) {
  auto& c = static_cast<Context&>(context);
  KIPP_RETURN_IF_ERROR(check_matmul_arguments(w, up, in, out, out_stride, epilogue, c.max_rows_, c.max_outputs_));
  // A failed launch before this one (prepare_input returns nothing) is reported here, not
  // under this product's name.
  if (const cudaError_t earlier = cudaGetLastError(); earlier != cudaSuccess)
    return make_error(std::string("a CUDA launch before this product failed (prepare_input or another kernel): ") +
                      cudaGetErrorString(earlier));
  switch (matmul_path(w.type, in.rows)) {
    case MatmulPath::Bf16Decode: return launch_bf16_decode(w, up, in, out, out_stride, epilogue, stream);
    case MatmulPath::QuantDecode: return launch_quant_decode(w, up, in, out, out_stride, epilogue, stream);
    case MatmulPath::QuantTiled: return launch_quant_tiled(w, up, in, out, out_stride, epilogue, stream);
    case MatmulPath::Bf16Cublas:
      if (epilogue == Epilogue::SwiGlu) return c.cublas_->swiglu(w, *up, in, out, out_stride, stream);
      return c.cublas_->product(w, in, out, out_stride, epilogue == Epilogue::Accumulate ? 1.0f : 0.0f, stream);
  }
  return ok_status();
}

}  // namespace kipp::cuda
