// BF16 and FP16 <-> FP32 conversions, round to nearest even, NaN preserved as quiet NaN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kipp {

inline float bf16_to_f32(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

inline uint16_t f32_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

void bf16_to_f32_row(const uint16_t* in, float* out, size_t count);
void f32_to_bf16_row(const float* in, uint16_t* out, size_t count);
void f16_to_f32_row(const uint16_t* in, float* out, size_t count);
void f32_to_f16_row(const float* in, uint16_t* out, size_t count);

}  // namespace kipp
