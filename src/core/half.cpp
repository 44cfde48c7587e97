#include "core/half.h"

#include <cmath>

namespace kipp {

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0u);
  } else if (exponent != 0) {
    out = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else {
    // Zero or subnormal: value = mantissa * 2^-24, exact in FP32.
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    uint32_t magnitude_bits;
    std::memcpy(&magnitude_bits, &magnitude, sizeof magnitude_bits);
    out = sign | magnitude_bits;
  }
  float value;
  std::memcpy(&value, &out, sizeof value);
  return value;
}

uint16_t f32_to_f16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((abs_bits >> 13) & 0x3ffu);
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;  // rounds to or beyond infinity
  const int32_t exponent = static_cast<int32_t>(abs_bits >> 23) - 127;
  if (exponent >= -14) {
    // Normal half: keep 10 mantissa bits, round to nearest even on the 13 dropped bits.
    uint32_t half = ((static_cast<uint32_t>(exponent + 15)) << 10) | ((abs_bits >> 13) & 0x3ffu);
    const uint32_t dropped = abs_bits & 0x1fffu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (half & 1u))) ++half;  // carry may bump exponent: correct
    return sign | static_cast<uint16_t>(half);
  }
  if (exponent < -25) return sign;  // below half the smallest subnormal
  // Subnormal half: value / 2^-24, rounded to nearest even.
  const uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
  const int shift = -exponent - 1;  // 14 (exponent -15) .. 24 (exponent -25)
  uint32_t half = mantissa >> shift;
  const uint32_t dropped = mantissa & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (dropped > halfway || (dropped == halfway && (half & 1u))) ++half;
  return sign | static_cast<uint16_t>(half);
}

void bf16_to_f32_row(const uint16_t* in, float* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = bf16_to_f32(in[i]);
}
void f32_to_bf16_row(const float* in, uint16_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = f32_to_bf16(in[i]);
}
void f16_to_f32_row(const uint16_t* in, float* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = f16_to_f32(in[i]);
}
void f32_to_f16_row(const float* in, uint16_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = f32_to_f16(in[i]);
}

}  // namespace kipp
