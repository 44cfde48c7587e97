// Prepared inputs in device memory: each array on its own 256-byte boundary (what cudaMalloc
// returns and what cuBLASLt prefers), so every array can be read with 16-byte vector loads.
#include "kernels/cuda/matmul.h"

namespace kipp::cuda {
namespace {

constexpr size_t kAlignment = 256;

size_t aligned_up(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

struct Pieces {
  size_t codes = 0;   // BF16 values or Q8 codes
  size_t scales = 0;  // Q8 only, then as many bytes of scaled sums
};

Pieces pieces(kernels::InputFormat format, uint32_t rows, uint32_t cols) {
  const size_t values = size_t{rows} * cols;
  if (format == kernels::InputFormat::BF16) return {aligned_up(values * sizeof(uint16_t)), 0};
  if (format == kernels::InputFormat::Q8)
    return {aligned_up(values), aligned_up(values / kernels::kInputBlock * sizeof(float))};
  return {};
}

}  // namespace

size_t device_input_bytes(kernels::InputFormat format, uint32_t rows, uint32_t cols) {
  const Pieces p = pieces(format, rows, cols);
  return p.codes + 2 * p.scales;
}

DeviceInput device_input_layout(kernels::InputFormat format, uint32_t rows, uint32_t cols, void* storage) {
  DeviceInput in;
  in.format = format;
  in.rows = rows;
  in.cols = cols;
  const Pieces p = pieces(format, rows, cols);
  auto* bytes = static_cast<uint8_t*>(storage);
  if (format == kernels::InputFormat::BF16) {
    in.bf16 = reinterpret_cast<uint16_t*>(bytes);
  } else if (format == kernels::InputFormat::Q8) {
    in.q8 = reinterpret_cast<int8_t*>(bytes);
    in.q8_scale = reinterpret_cast<float*>(bytes + p.codes);
    in.q8_scaled_sum = reinterpret_cast<float*>(bytes + p.codes + p.scales);
  }
  return in;
}

}  // namespace kipp::cuda
