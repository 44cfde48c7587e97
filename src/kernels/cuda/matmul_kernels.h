// The kernels behind matmul(), one launcher per path (arguments already checked by
// check_matmul_arguments). Each returns last_launch_status naming its kernel.
#pragma once

#include <cuda_runtime.h>

#include "core/status.h"
#include "kernels/cuda/matmul.h"

namespace kipp::cuda {

// Few rows (up to kDecodeRows): one warp per output row, every weight read once for all rows.
Status launch_bf16_decode(const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, float* out,
                          uint32_t out_stride, Epilogue epilogue, cudaStream_t stream);
Status launch_quant_decode(const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, float* out,
                           uint32_t out_stride, Epilogue epilogue, cudaStream_t stream);

// Many rows of Q8 inputs against Q8_0 / affine4 weights: tiles of outputs x rows in shared memory.
Status launch_quant_tiled(const DeviceMatrix& w, const DeviceMatrix* up, const DeviceInput& in, float* out,
                          uint32_t out_stride, Epilogue epilogue, cudaStream_t stream);

// out[r * out_stride + o] = silu(out[r * out_stride + o]) * up[r * outputs + o]: the SwiGlu
// epilogue of the cuBLASLt path, whose gate product lands in `out` and up product in scratch.
Status launch_swiglu(float* out, uint32_t out_stride, const float* up, uint32_t rows, uint32_t outputs,
                     cudaStream_t stream);

}  // namespace kipp::cuda
