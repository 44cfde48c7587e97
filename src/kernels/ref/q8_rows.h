// The scalar definitions of Q8 input preparation and of products over Q8 inputs. The reference
// runs them as they are; the portable table calls them from each of its SIMD targets, where the
// compiler inlines and vectorizes them for that target (the integer sums are exact and the float
// sequence is unchanged, so every copy computes the same values).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/half.h"
#include "format/quant.h"
#include "kernels/matmul_input.h"

namespace kipp::kernels::ref {

// Per block of 32: d = max|x| / 127, codes round-to-even(x * 127 / max|x|) in [-127, 127].
inline void quantize_q8_rows(const float* x, size_t rows, size_t x_stride, size_t cols, int8_t* codes, float* scales,
                             int32_t* sums, float* scaled_sums) {
  const size_t blocks = cols / kInputBlock;
  for (size_t r = 0; r < rows; ++r)
    for (size_t b = 0; b < blocks; ++b) {
      const float* values = x + r * x_stride + b * kInputBlock;
      int8_t* q = codes + r * cols + b * kInputBlock;
      float largest = 0;
      for (size_t i = 0; i < kInputBlock; ++i) largest = std::fmax(largest, std::fabs(values[i]));
      // A block so small that 127 / largest overflows is quantized as zeros (its scale is below
      // 1e-38 anyway).
      const float quotient = largest > 0 ? 127.0f / largest : 0.0f;
      const float inverse = std::isfinite(quotient) ? quotient : 0.0f;
      int32_t sum = 0;
      for (size_t i = 0; i < kInputBlock; ++i) {
        q[i] = static_cast<int8_t>(std::fmin(127.0f, std::fmax(-127.0f, std::nearbyint(values[i] * inverse))));
        sum += q[i];
      }
      const size_t block = r * blocks + b;
      scales[block] = largest / 127.0f;
      sums[block] = sum;
      scaled_sums[block] = scales[block] * static_cast<float>(sum);
    }
}

// Row `row` of `in` times one Q8_0 weight row: per block the exact integer sum, times weight
// scale x input scale, blocks added in order.
inline float dot_q8_0_row(const BlockQ8_0* w, const PreparedInput& in, size_t row) {
  const size_t blocks = in.cols / kInputBlock;
  const int8_t* codes = in.q8 + row * in.cols;
  float sum = 0;
  for (size_t b = 0; b < blocks; ++b) {
    int32_t block_sum = 0;
    for (size_t i = 0; i < kInputBlock; ++i) block_sum += int32_t{w[b].q[i]} * codes[b * kInputBlock + i];
    sum += f16_to_f32(w[b].scale_f16) * in.q8_scale[row * blocks + b] * static_cast<float>(block_sum);
  }
  return sum;
}

// The same for affine4 (ggml Q4_1): code j < 16 is the low nibble of byte j, code j + 16 the
// high one; the min term is min x (input scale x code sum).
inline float dot_affine4_row(const BlockAffine4* w, const PreparedInput& in, size_t row) {
  const size_t blocks = in.cols / kInputBlock;
  const int8_t* codes = in.q8 + row * in.cols;
  float sum = 0;
  for (size_t b = 0; b < blocks; ++b) {
    int32_t block_sum = 0;
    const int8_t* x = codes + b * kInputBlock;
    for (size_t i = 0; i < kInputBlock / 2; ++i)
      block_sum += int32_t{w[b].nibbles[i] & 0x0F} * x[i] + int32_t{w[b].nibbles[i] >> 4} * x[i + kInputBlock / 2];
    const size_t block = row * blocks + b;
    sum += f16_to_f32(w[b].scale_f16) * in.q8_scale[block] * static_cast<float>(block_sum) +
           f16_to_f32(w[b].min_f16) * in.q8_scaled_sum[block];
  }
  return sum;
}

}  // namespace kipp::kernels::ref
