// Block quantization formats (the ggml layouts), 32 weights per block:
//   Q8_0:    fp16 scale d, 32 x int8 q;            x = d * q
//   affine4: fp16 scale d, fp16 min m, 16 bytes;   x = d * q + m, q in 0..15
//            (ggml Q4_1: weight j < 16 is the low nibble of byte j, weight j + 16 the high one)
// Quantization rounds the scale (and min) to fp16 first and quantizes against those rounded
// values, so dequantize(quantize(x)) is what every decoder computes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kipp {

inline constexpr size_t kQuantBlock = 32;

struct BlockQ8_0 {
  uint16_t scale_f16;
  int8_t q[kQuantBlock];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockAffine4 {
  uint16_t scale_f16;
  uint16_t min_f16;
  uint8_t nibbles[kQuantBlock / 2];
};
static_assert(sizeof(BlockAffine4) == 20);

// `count` must be a multiple of kQuantBlock; the output holds count / 32 blocks.
void quantize_q8_0(const float* in, BlockQ8_0* out, size_t count);
void dequantize_q8_0(const BlockQ8_0* in, float* out, size_t count);
void quantize_affine4(const float* in, BlockAffine4* out, size_t count);
void dequantize_affine4(const BlockAffine4* in, float* out, size_t count);

}  // namespace kipp
