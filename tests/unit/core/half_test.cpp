#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

// The compiler's half type is the FP16 oracle: __fp16 on AArch64 (IEEE format; GCC 12 has no
// _Float16 in C++ there), _Float16 elsewhere where the compiler has it (GCC on x86-64; clang 14
// on x86-64 does not, and those tests are skipped there).
#if defined(__aarch64__)
#define KIPP_HAVE_FLOAT16 1
using OracleHalf = __fp16;
#elif defined(__FLT16_MAX__)
#define KIPP_HAVE_FLOAT16 1
using OracleHalf = _Float16;
#endif

namespace kipp {
namespace {

uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float float_of(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

bool is_f16_nan(uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0; }
bool is_bf16_nan(uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0; }

// Floats worth converting: a stride through every bit pattern plus the usual suspects.
std::vector<float> sampled_floats() {
  std::vector<float> out;
  // 4093 is prime, so the stride visits every residue class of the low mantissa bits.
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 4093) out.push_back(float_of(static_cast<uint32_t>(bits)));
  for (float v : {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), 65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e-8f,
                  2.9802322e-8f /* 2^-25 */, 5.9604645e-8f /* 2^-24 */, 6.097555e-5f /* largest f16 subnormal */}) {
    out.push_back(v);
    out.push_back(-v);
  }
  return out;
}

#ifdef KIPP_HAVE_FLOAT16
float oracle_f16_to_f32(uint16_t bits) {
  OracleHalf half;
  std::memcpy(&half, &bits, sizeof half);
  return static_cast<float>(half);
}

uint16_t oracle_f32_to_f16(float value) {
  const OracleHalf half = static_cast<OracleHalf>(value);
  uint16_t bits;
  std::memcpy(&bits, &half, sizeof bits);
  return bits;
}

void expect_f32_to_f16_matches(float value) {
  const uint16_t ours = f32_to_f16(value);
  const uint16_t oracle = oracle_f32_to_f16(value);
  if (is_f16_nan(oracle)) {
    EXPECT_TRUE(is_f16_nan(ours)) << std::hex << "input 0x" << bits_of(value) << " gave 0x" << ours;
    EXPECT_EQ(ours & 0x8000u, (bits_of(value) >> 16) & 0x8000u) << "NaN sign, input 0x" << std::hex << bits_of(value);
  } else {
    EXPECT_EQ(ours, oracle) << std::hex << "input 0x" << bits_of(value) << " (" << value << ")";
  }
}
#endif

TEST(HalfF16, ToF32AllBitPatternsMatchCompiler) {
#ifndef KIPP_HAVE_FLOAT16
  GTEST_SKIP() << "no _Float16 in this compiler";
#else
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto half = static_cast<uint16_t>(bits);
    const float ours = f16_to_f32(half);
    const float oracle = oracle_f16_to_f32(half);
    if (std::isnan(oracle)) {
      ASSERT_TRUE(std::isnan(ours)) << std::hex << "0x" << bits;
      ASSERT_EQ(std::signbit(ours), std::signbit(oracle)) << std::hex << "0x" << bits;
    } else {
      ASSERT_EQ(bits_of(ours), bits_of(oracle)) << std::hex << "0x" << bits;  // -0.0 included
    }
  }
#endif
}

TEST(HalfF16, FromF32SampledMatchesCompiler) {
#ifndef KIPP_HAVE_FLOAT16
  GTEST_SKIP() << "no _Float16 in this compiler";
#else
  for (float value : sampled_floats()) expect_f32_to_f16_matches(value);
#endif
}

TEST(HalfF16, FromF32HalfwayCasesMatchCompiler) {
#ifndef KIPP_HAVE_FLOAT16
  GTEST_SKIP() << "no _Float16 in this compiler";
#else
  // Around every finite half value: the value, the exact midpoint to the next one (a tie,
  // which must go to the even neighbour) and the floats just either side of that midpoint.
  // Midpoints are exact in float: halves have 11 significant bits, floats 24. The step past
  // the largest half (0x7bff, 65504) goes to 65536, where rounding overflows to infinity.
  for (uint32_t bits = 0; bits < 0x7c00; ++bits) {
    const float low = f16_to_f32(static_cast<uint16_t>(bits));
    const float high = bits == 0x7bff ? 65536.0f : f16_to_f32(static_cast<uint16_t>(bits + 1));
    const float middle = low + (high - low) / 2;
    for (float value : {low, middle, std::nextafter(middle, 0.0f), std::nextafter(middle, high)}) {
      expect_f32_to_f16_matches(value);
      expect_f32_to_f16_matches(-value);
    }
  }
  // Every NaN class keeps being a NaN, including payloads that lose all kept bits.
  for (uint32_t nan : {0x7f800001u, 0x7f801fffu, 0x7fc00000u, 0x7fffffffu, 0xff800001u, 0xffc00000u}) {
    EXPECT_TRUE(is_f16_nan(f32_to_f16(float_of(nan)))) << std::hex << nan;
  }
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00u);  // the tie above 65504 rounds to inf
  EXPECT_EQ(f32_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7bffu);
  EXPECT_EQ(f32_to_f16(2.9802322e-8f), 0x0000u);  // 2^-25: tie between 0 and 2^-24, to 0
  EXPECT_EQ(f32_to_f16(std::nextafter(2.9802322e-8f, 1.0f)), 0x0001u);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000u);
#endif
}

// Round to nearest even computed independently: the two bf16 neighbours of `value` and the
// exact distances to them in double arithmetic.
uint16_t reference_f32_to_bf16(float value) {
  const uint32_t bits = bits_of(value);
  const auto toward_zero = static_cast<uint16_t>(bits >> 16);
  if ((bits & 0xffffu) == 0) return toward_zero;  // exact, infinities included
  const double low = float_of(static_cast<uint32_t>(toward_zero) << 16);
  // One bf16 step up in magnitude; past the largest finite bf16 it is 2^128, where IEEE
  // rounding places the overflow threshold as if the exponent range were unbounded.
  const double high = (toward_zero & 0x7fffu) == 0x7f7fu
                          ? std::copysign(std::ldexp(1.0, 128), static_cast<double>(value))
                          : float_of(static_cast<uint32_t>(toward_zero + 1) << 16);
  const double distance_low = std::fabs(static_cast<double>(value) - low);
  const double distance_high = std::fabs(high - static_cast<double>(value));
  if (distance_low < distance_high) return toward_zero;
  if (distance_high < distance_low) return static_cast<uint16_t>(toward_zero + 1);
  return (toward_zero & 1u) ? static_cast<uint16_t>(toward_zero + 1) : toward_zero;
}

void expect_f32_to_bf16_matches(float value) {
  const uint16_t ours = f32_to_bf16(value);
  if (std::isnan(value)) {
    EXPECT_TRUE(is_bf16_nan(ours)) << std::hex << "input 0x" << bits_of(value) << " gave 0x" << ours;
    EXPECT_EQ(ours & 0x8000u, (bits_of(value) >> 16) & 0x8000u) << "NaN sign";
  } else {
    EXPECT_EQ(ours, reference_f32_to_bf16(value)) << std::hex << "input 0x" << bits_of(value);
  }
}

TEST(HalfBf16, FromF32SampledMatchesReference) {
  for (float value : sampled_floats()) expect_f32_to_bf16_matches(value);
}

TEST(HalfBf16, FromF32HalfwayCasesMatchReference) {
  // For every bf16 pattern: the exact tie above it and the floats either side of the tie.
  for (uint32_t high = 0; high <= 0xffff; ++high) {
    const uint32_t base = high << 16;
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      expect_f32_to_bf16_matches(float_of(base | low));
    }
  }
  EXPECT_EQ(f32_to_bf16(float_of(0x3f808000u)), 0x3f80u);              // tie, even stays
  EXPECT_EQ(f32_to_bf16(float_of(0x3f818000u)), 0x3f82u);              // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80u);  // overflows to inf
  EXPECT_EQ(f32_to_bf16(float_of(0x7f7f7fffu)), 0x7f7fu);
  EXPECT_TRUE(is_bf16_nan(f32_to_bf16(float_of(0x7f800001u))));  // would truncate to inf
  EXPECT_TRUE(is_bf16_nan(f32_to_bf16(float_of(0xff800001u))));
}

TEST(HalfBf16, ToF32IsExactWidening) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float value = bf16_to_f32(static_cast<uint16_t>(bits));
    ASSERT_EQ(bits_of(value), bits << 16);
    if (!std::isnan(value)) {
      ASSERT_EQ(f32_to_bf16(value), bits);  // round trip is the identity
    }
  }
}

TEST(HalfRows, MatchScalarConversions) {
  std::vector<float> floats;
  for (uint32_t i = 0; i < 1000; ++i) floats.push_back(float_of(i * 4294967u + 12345u));
  const size_t n = floats.size();
  std::vector<uint16_t> halves(n), bf16s(n);
  std::vector<float> back(n), back_bf16(n);
  f32_to_f16_row(floats.data(), halves.data(), n);
  f32_to_bf16_row(floats.data(), bf16s.data(), n);
  f16_to_f32_row(halves.data(), back.data(), n);
  bf16_to_f32_row(bf16s.data(), back_bf16.data(), n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(halves[i], f32_to_f16(floats[i]));
    EXPECT_EQ(bf16s[i], f32_to_bf16(floats[i]));
    EXPECT_EQ(bits_of(back[i]), bits_of(f16_to_f32(halves[i])));
    EXPECT_EQ(bits_of(back_bf16[i]), bits_of(bf16_to_f32(bf16s[i])));
  }
}

}  // namespace
}  // namespace kipp
