// Matrix products on a CUDA device over the weights as the GGUF stores them (BF16 rows, Q8_0 and
// affine4 blocks), with the inputs rounded as the CPU fast tables round them
// (kernels/matmul_input.h): BF16 inputs for BF16 weights, Q8 inputs (per block of 32 an FP32
// scale and int8 codes) for quantized ones, so a product differs from the CPU's only in the order
// its float sums are added. Few rows (decode) run as kernels that read every weight once for all
// rows; many rows (prefill) run on the tensor cores through cuBLASLt (BF16) or as tiled int8 dot
// products (quantized), chosen inside matmul().
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/status.h"
#include "format/ggml_types.h"
#include "kernels/matmul_input.h"

namespace kipp::cuda {

// A weight matrix in device memory: `rows` output features of `cols` inputs, row-major, each row
// row_bytes of `type` (BF16, Q8_0 or Q4_1) exactly as in the GGUF file.
struct DeviceMatrix {
  GgmlType type = GgmlType::BF16;
  const uint8_t* data = nullptr;
  uint32_t rows = 0;
  uint32_t cols = 0;
  uint64_t row_bytes = 0;
};

// Prepared product inputs in device memory, the GPU twin of kernels::PreparedInput: `rows` rows
// of `cols` values (cols a multiple of 32) in `format` (BF16 or Q8; the GPU has no F32 inputs).
struct DeviceInput {
  kernels::InputFormat format = kernels::InputFormat::BF16;
  uint32_t rows = 0;
  uint32_t cols = 0;
  uint16_t* bf16 = nullptr;        // BF16: rows * cols
  int8_t* q8 = nullptr;            // Q8: rows * cols codes
  float* q8_scale = nullptr;       // Q8: rows * cols / 32 scales d
  float* q8_scaled_sum = nullptr;  // Q8: rows * cols / 32 values d * (code sum), for affine4's min term
};

// Bytes of device storage `rows` x `cols` prepared inputs of `format` take, and the view of them
// over such storage (256-byte aligned).
size_t device_input_bytes(kernels::InputFormat format, uint32_t rows, uint32_t cols);
DeviceInput device_input_layout(kernels::InputFormat format, uint32_t rows, uint32_t cols, void* storage);

// Prepares every row of `in` from device floats (row r at x + r * x_stride) with the values
// kernels::ref::prepare_rows computes on the CPU, bit for bit.
void prepare_input(const float* x, uint32_t x_stride, const DeviceInput& in, cudaStream_t stream);

// What a product does with its result out[r * out_stride + o] (r < in.rows, o < w.rows).
enum class Epilogue {
  Store,       // out = w . x
  Accumulate,  // out += w . x  (the residual add)
  SwiGlu,      // out = silu(w . x) * (up . x): w is the gate projection, `up` the up projection
};

// cuBLASLt's handle and workspace, the scratch of the paths that need one (allocated with the
// context, never moved, so captured graphs stay valid), and the algorithms chosen per shape. One
// per stream. Every path may be captured in a CUDA graph once each of its shapes has run outside
// one: cuBLASLt chooses a new shape's algorithm on the host.
class MatmulContext {
 public:
  virtual ~MatmulContext() = default;
  // Device bytes the context holds (workspace and scratch).
  virtual uint64_t device_bytes() const = 0;
};

// A context for products of up to `max_rows` input rows and `max_outputs` output features, the
// SwiGlu products up to `max_swiglu_outputs` (0: max_outputs). Fails with a clear message when
// cuBLASLt cannot be opened or memory runs out.
Expected<std::unique_ptr<MatmulContext>> create_matmul_context(uint32_t max_rows, uint32_t max_outputs,
                                                               uint32_t max_swiglu_outputs = 0);

// out (device floats) per `epilogue` from w (and `up` for SwiGlu: same type and shape as w) and
// the prepared input `in` (in.format == kernels::input_format(w.type), in.cols == w.cols).
// Enqueues on `stream`; an error names the failed launch or cuBLASLt call.
Status matmul(MatmulContext& context, const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, float* out,
              uint32_t out_stride, Epilogue epilogue, cudaStream_t stream);

}  // namespace kipp::cuda
