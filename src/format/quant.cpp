#include "format/quant.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "core/half.h"

namespace kipp {
namespace {

constexpr float kMaxHalf = 65504.0f;  // largest finite fp16

// fp16 bits of a scale or min, saturated to the finite fp16 range: a block of huge values
// then stores the largest scale and its extreme weights saturate, instead of storing an
// infinite scale that would decode as inf * 0 = NaN.
uint16_t to_f16_saturated(float value) { return f32_to_f16(std::clamp(value, -kMaxHalf, kMaxHalf)); }

// Rounds to nearest, ties away from zero (what roundf does, as in the ggml reference
// quantizers), after clamping to [lo, hi]. A NaN is treated as 0 before clamping: converting
// a NaN to an integer is undefined behaviour, so it never reaches lround.
long round_clamped(double value, double lo, double hi) {
  if (std::isnan(value)) value = 0.0;
  return std::lround(std::clamp(value, lo, hi));
}

// Non-finite inputs: NaN is quantized as 0 would be; +-inf are left out of the block's range
// and saturate to its extreme codes; a block without finite values decodes to zeros.
float nan_to_zero(float value) { return std::isnan(value) ? 0.0f : value; }

void quantize_q8_0_block(const float* in, BlockQ8_0& out) {
  float amax = 0.0f;
  for (size_t i = 0; i < kQuantBlock; ++i) {
    if (std::isfinite(in[i])) amax = std::max(amax, std::fabs(in[i]));
  }
  out.scale_f16 = to_f16_saturated(amax / 127.0f);
  // Quantize against the decoded fp16 scale. The inverse and product are in double: their
  // relative error (~2^-52) is far below the distance of x / d from a rounding tie (>= ~2^-32
  // for float x and fp16 d), so q is exactly round(x / d) of the true quotient.
  const double d = f16_to_f32(out.scale_f16);
  const double inverse = d > 0.0 ? 1.0 / d : 0.0;
  for (size_t i = 0; i < kQuantBlock; ++i) {
    out.q[i] = static_cast<int8_t>(round_clamped(nan_to_zero(in[i]) * inverse, -127.0, 127.0));
  }
}

void quantize_affine4_block(const float* in, BlockAffine4& out) {
  float lo = INFINITY;
  float hi = -INFINITY;
  for (size_t i = 0; i < kQuantBlock; ++i) {
    if (!std::isfinite(in[i])) continue;
    lo = std::min(lo, in[i]);
    hi = std::max(hi, in[i]);
  }
  if (lo > hi) lo = hi = 0.0f;  // no finite value
  // hi - lo may overflow to inf for values near FLT_MAX; the saturation handles it.
  out.scale_f16 = to_f16_saturated((hi - lo) / 15.0f);
  out.min_f16 = to_f16_saturated(lo);
  // As for Q8_0: against the decoded fp16 values, in double.
  const double d = f16_to_f32(out.scale_f16);
  const double m = f16_to_f32(out.min_f16);
  const double inverse = d > 0.0 ? 1.0 / d : 0.0;
  uint8_t q[kQuantBlock];
  for (size_t i = 0; i < kQuantBlock; ++i) {
    q[i] = static_cast<uint8_t>(round_clamped((nan_to_zero(in[i]) - m) * inverse, 0.0, 15.0));
  }
  for (size_t j = 0; j < kQuantBlock / 2; ++j) {
    out.nibbles[j] = static_cast<uint8_t>(q[j] | (q[j + kQuantBlock / 2] << 4));
  }
}

}  // namespace

// A trailing partial block (count not a multiple of 32, a caller bug) is neither read nor
// written; debug builds assert.
void quantize_q8_0(const float* in, BlockQ8_0* out, size_t count) {
  assert(count % kQuantBlock == 0);
  for (size_t b = 0; b < count / kQuantBlock; ++b) quantize_q8_0_block(in + b * kQuantBlock, out[b]);
}

void dequantize_q8_0(const BlockQ8_0* in, float* out, size_t count) {
  assert(count % kQuantBlock == 0);
  for (size_t b = 0; b < count / kQuantBlock; ++b) {
    const float d = f16_to_f32(in[b].scale_f16);
    float* row = out + b * kQuantBlock;
    for (size_t i = 0; i < kQuantBlock; ++i) row[i] = d * static_cast<float>(in[b].q[i]);
  }
}

void quantize_affine4(const float* in, BlockAffine4* out, size_t count) {
  assert(count % kQuantBlock == 0);
  for (size_t b = 0; b < count / kQuantBlock; ++b) quantize_affine4_block(in + b * kQuantBlock, out[b]);
}

void dequantize_affine4(const BlockAffine4* in, float* out, size_t count) {
  assert(count % kQuantBlock == 0);
  constexpr size_t kHalf = kQuantBlock / 2;
  for (size_t b = 0; b < count / kQuantBlock; ++b) {
    const float d = f16_to_f32(in[b].scale_f16);
    const float m = f16_to_f32(in[b].min_f16);
    float* row = out + b * kQuantBlock;
    for (size_t j = 0; j < kHalf; ++j) {
      row[j] = d * static_cast<float>(in[b].nibbles[j] & 0x0f) + m;
      row[j + kHalf] = d * static_cast<float>(in[b].nibbles[j] >> 4) + m;
    }
  }
}

}  // namespace kipp
