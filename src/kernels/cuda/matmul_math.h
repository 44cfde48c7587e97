// The scalar arithmetic of the CUDA products and of their input preparation, as functions that
// compile for the host and the device alike: the kernels call them, and the unit tests run the
// very same code on the CPU against kernels/ref. Every multiply and add that the reference rounds
// on its own is written as __fmul_rn / __fadd_rn on the device, because nvcc would otherwise
// contract a * b + c into one fused multiply-add and change the last bit; the host side is
// plain C++ (the host compiler targets no FMA instruction by default, the CPU reference does not
// contract either: it is built with -ffp-contract=off).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/rounded_math.h"

namespace kipp::cuda::math {

inline constexpr int kBlock = 32;  // values per Q8 input block and per Q8_0 / affine4 weight block

KIPP_CUDA_HD float bf16_to_float(uint16_t bits) { return bits_to_float(static_cast<uint32_t>(bits) << 16); }

// Round to nearest even; NaN stays a quiet NaN with its sign and top payload bits (core/half.h).
KIPP_CUDA_HD uint16_t float_to_bf16(float value) {
  const uint32_t bits = float_to_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

// FP16 to FP32 by bits, as core/half.cpp decodes it (subnormals exactly, NaN made quiet).
KIPP_CUDA_HD float f16_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return bits_to_float(sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0u));
  if (exponent != 0) return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in FP32 (a power-of-two product of an integer < 2^10).
  return bits_to_float(sign | float_to_bits(mul(static_cast<float>(mantissa), 5.9604644775390625e-8f)));
}

// The block maximum |x| is reduced with fmax, which skips NaN: any order gives the reference's
// value as long as it starts from 0 (a block of NaN only has largest 0).
KIPP_CUDA_HD float max_magnitude(float largest, float value) { return fmaxf(largest, fabsf(value)); }

// 127 / largest, or 0 when the block is all zeros or so small that the quotient overflows
// (kernels/ref/q8_rows.h).
KIPP_CUDA_HD float q8_inverse(float largest) {
  const float quotient = largest > 0 ? 127.0f / largest : 0.0f;
#ifdef __CUDA_ARCH__
  return isfinite(quotient) ? quotient : 0.0f;
#else
  return std::isfinite(quotient) ? quotient : 0.0f;
#endif
}

// One code: x * inverse rounded half to even, clamped to [-127, 127] with fmin/fmax, so an inf
// or NaN product (an inf or NaN input) clamps as the reference clamps it.
KIPP_CUDA_HD int8_t q8_code(float value, float inverse) {
#ifdef __CUDA_ARCH__
  const float rounded = rintf(mul(value, inverse));
#else
  const float rounded = std::nearbyint(mul(value, inverse));
#endif
  return static_cast<int8_t>(fminf(127.0f, fmaxf(-127.0f, rounded)));
}

KIPP_CUDA_HD float q8_scale(float largest) { return largest / 127.0f; }
KIPP_CUDA_HD float q8_scaled_sum(float scale, int32_t code_sum) { return mul(scale, static_cast<float>(code_sum)); }

// A weight block ready for the integer dot: eight 32-bit words of four codes each, word k
// against input codes 4k..4k+3 (affine4's nibbles unpacked: low nibbles are codes 0..15, high
// nibbles codes 16..31), and its scale (and min) as FP32.
struct WeightBlock {
  int32_t words[8];
  float scale;
  float min;
};

// A Q8_0 block (2-byte scale, 32 int8 codes: 34 bytes, so only 2-byte aligned in a row) read as
// 2-byte halves.
KIPP_CUDA_HD WeightBlock load_q8_0(const uint8_t* block) {
  const auto* halves = reinterpret_cast<const uint16_t*>(block);
  WeightBlock w;
  for (int k = 0; k < 8; ++k)
    w.words[k] = static_cast<int32_t>(halves[1 + 2 * k] | (static_cast<uint32_t>(halves[2 + 2 * k]) << 16));
  w.scale = f16_to_float(halves[0]);
  w.min = 0.0f;
  return w;
}

// An affine4 block (2-byte scale, 2-byte min, 16 bytes of nibbles: 20 bytes, 4-byte aligned in
// a 4-byte aligned row) read as 32-bit words. Nibble codes are 0..15, so as signed bytes they
// are the same numbers and the signed dot serves both formats.
KIPP_CUDA_HD WeightBlock load_affine4(const uint8_t* block) {
  const auto* words = reinterpret_cast<const uint32_t*>(block);
  WeightBlock w;
  for (int k = 0; k < 4; ++k) {
    w.words[k] = static_cast<int32_t>(words[1 + k] & 0x0f0f0f0fu);
    w.words[4 + k] = static_cast<int32_t>((words[1 + k] >> 4) & 0x0f0f0f0fu);
  }
  w.scale = f16_to_float(static_cast<uint16_t>(words[0] & 0xffffu));
  w.min = f16_to_float(static_cast<uint16_t>(words[0] >> 16));
  return w;
}

// c + the dot of the four signed bytes of a and of b (the DP4A instruction on the device).
KIPP_CUDA_HD int32_t dp4a(int32_t a, int32_t b, int32_t c) {
#ifdef __CUDA_ARCH__
  return __dp4a(a, b, c);
#else
  for (int i = 0; i < 4; ++i)
    c += static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i)) *
         static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i));
  return c;
#endif
}

// The exact integer dot of a weight block with 32 input codes (as eight words, little-endian).
KIPP_CUDA_HD int32_t block_dot(const WeightBlock& w, const int32_t* input_words) {
  int32_t sum = 0;
  for (int k = 0; k < 8; ++k) sum = dp4a(w.words[k], input_words[k], sum);
  return sum;
}

// A block's term of a Q8_0 product: weight scale x input scale x exact code dot, in that order.
KIPP_CUDA_HD float q8_0_term(float weight_scale, float input_scale, int32_t code_dot) {
  return mul(mul(weight_scale, input_scale), static_cast<float>(code_dot));
}

// A block's term of an affine4 product: the scaled dot plus weight min x input scaled code sum.
KIPP_CUDA_HD float affine4_term(float weight_scale, float weight_min, float input_scale, int32_t code_dot,
                                float input_scaled_sum) {
  return add(q8_0_term(weight_scale, input_scale, code_dot), mul(weight_min, input_scaled_sum));
}

// silu(gate) * up as kernels::ref::swiglu writes it (expf may differ from the host's by an ulp).
KIPP_CUDA_HD float swiglu(float gate, float up) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(__fdiv_rn(gate, __fadd_rn(1.0f, expf(-gate))), up);
#else
  return gate / (1.0f + std::exp(-gate)) * up;
#endif
}

}  // namespace kipp::cuda::math
