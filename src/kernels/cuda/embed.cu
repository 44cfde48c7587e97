#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/forward_kernels.h"
#include "kernels/cuda/launch_status.h"

namespace kipp::cuda {
namespace {

constexpr uint32_t kThreads = 256;
constexpr uint32_t kBlock = 32;  // values per Q8_0 / Q4_1 block

__device__ float f16_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | (p[1] << 8))));
}

// Column c of a row, exactly as ref::dequantize_row computes it.
__device__ float dequantize(GgmlType type, const uint8_t* row, uint32_t c) {
  switch (type) {
    case GgmlType::F32: return reinterpret_cast<const float*>(row)[c];
    case GgmlType::F16: return f16_at(row + 2 * size_t{c});
    case GgmlType::BF16: return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[c]);
    case GgmlType::Q8_0: {
      const uint8_t* block = row + size_t{c / kBlock} * 34;
      return __fmul_rn(f16_at(block), static_cast<float>(reinterpret_cast<const int8_t*>(block + 2)[c % kBlock]));
    }
    case GgmlType::Q4_1: {
      const uint8_t* block = row + size_t{c / kBlock} * 20;
      const uint32_t j = c % kBlock;
      const uint8_t byte = block[4 + j % (kBlock / 2)];
      const uint32_t code = j < kBlock / 2 ? byte & 0x0fu : byte >> 4;
      return __fadd_rn(__fmul_rn(f16_at(block), static_cast<float>(code)), f16_at(block + 2));
    }
    default: return __int_as_float(0x7fc00000);
  }
}

__global__ void embed_kernel(DeviceMatrix table, const uint32_t* tokens, float* x) {
  const uint32_t token = tokens[blockIdx.x];
  float* out = x + size_t{blockIdx.x} * table.cols;
  // An id past the table (the runtime checks ids) shows as NaN rather than a stray read.
  if (token >= table.rows) {
    for (uint32_t c = threadIdx.x; c < table.cols; c += blockDim.x) out[c] = __int_as_float(0x7fc00000);
    return;
  }
  const uint8_t* row = table.data + size_t{token} * table.row_bytes;
  for (uint32_t c = threadIdx.x; c < table.cols; c += blockDim.x) out[c] = dequantize(table.type, row, c);
}

}  // namespace

Status embed_rows(const DeviceMatrix& table, const uint32_t* tokens, uint32_t rows, float* x, cudaStream_t stream) {
  if (rows == 0) return ok_status();
  embed_kernel<<<rows, kThreads, 0, stream>>>(table, tokens, x);
  return last_launch_status("embedding kernel");
}

}  // namespace kipp::cuda
