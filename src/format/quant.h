// Block quantization formats (the ggml layouts), 32 weights per block:
//   Q8_0:    fp16 scale d, 32 x int8 q;            x = d * q
//   affine4: fp16 scale d, fp16 min m, 16 bytes;   x = d * q + m, q in 0..15
//            (ggml Q4_1: weight j < 16 is the low nibble of byte j, weight j + 16 the high one)
// Quantization rounds the scale (and min) to fp16 first and quantizes against those rounded
// values, so dequantize(quantize(x)) is what every decoder computes:
//   Q8_0:    d = fp16(amax / 127),          q = round(x / d) clamped to [-127, 127]
//   affine4: d = fp16((max - min) / 15),    m = fp16(min), q = round((x - m) / d) clamped to [0, 15]
// round() is to nearest with ties away from zero (C roundf, as the ggml reference quantizers);
// the quotient is formed in double, so for Q8_0 q is the rounding of the exact x / d. A zero d
// (all-zero or constant block) gives q = 0. Scale and min saturate at +-65504 (largest finite
// fp16) so a block of huge values decodes to finite, saturated values, never inf or NaN.
// Non-finite input: NaN is quantized as 0.0 would be; +-inf take no part in the block's range
// and saturate to its extreme codes; a block with no finite value decodes to zeros.
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
