// Q8_0 and affine4 (ggml Q4_1) block quantizers, checked against expectations the test
// computes itself in double precision: its own fp16 rounding and decoding, its own rounding
// of x / d, its own nibble packing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "format/quant.h"
#include "unit/helpers/float_formats.h"

namespace {

using kipp::BlockAffine4;
using kipp::BlockQ8_0;
using kipp::kQuantBlock;
using kipp::testing::decode_f16;

constexpr double kMaxHalf = 65504.0;

// Nearest fp16 value (ties to even) of a finite v with |v| <= 65504.
double round_to_half(double v) {
  const double magnitude = std::fabs(v);
  if (magnitude == 0.0) return v;
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude in [2^(exponent-1), 2^exponent)
  const double ulp = std::ldexp(1.0, std::max(exponent - 11, -24));
  return std::copysign(std::nearbyint(magnitude / ulp) * ulp, v);
}

double round_away(double v) { return std::round(v); }  // ties away from zero

struct ExpectedQ8 {
  double d16;
  int q[kQuantBlock];
};

// The Q8_0 rule restated: d = amax / 127 (in float, as the format's reference does), rounded
// to fp16, then q = round(x / d16) in double.
ExpectedQ8 expect_q8_0(const float* x) {
  float amax = 0.0f;
  for (size_t i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  ExpectedQ8 out{};
  out.d16 = round_to_half(std::min(static_cast<double>(amax / 127.0f), kMaxHalf));
  for (size_t i = 0; i < kQuantBlock; ++i) {
    const double q = out.d16 == 0.0 ? 0.0 : round_away(static_cast<double>(x[i]) / out.d16);
    out.q[i] = static_cast<int>(std::clamp(q, -127.0, 127.0));
  }
  return out;
}

struct ExpectedAffine4 {
  double d16;
  double m16;
  int q[kQuantBlock];
};

ExpectedAffine4 expect_affine4(const float* x) {
  const float lo = *std::min_element(x, x + kQuantBlock);
  const float hi = *std::max_element(x, x + kQuantBlock);
  ExpectedAffine4 out{};
  out.d16 = round_to_half(std::min(static_cast<double>((hi - lo) / 15.0f), kMaxHalf));
  out.m16 = round_to_half(std::clamp(static_cast<double>(lo), -kMaxHalf, kMaxHalf));
  for (size_t i = 0; i < kQuantBlock; ++i) {
    const double q = out.d16 == 0.0 ? 0.0 : round_away((static_cast<double>(x[i]) - out.m16) / out.d16);
    out.q[i] = static_cast<int>(std::clamp(q, 0.0, 15.0));
  }
  return out;
}

int nibble(const BlockAffine4& block, size_t i) {
  const size_t half = kQuantBlock / 2;
  return i < half ? (block.nibbles[i] & 0x0f) : (block.nibbles[i - half] >> 4);
}

// Quantizes one block and checks every stored field and decoded value against the restated
// rule, plus the error bound |x - x'| <= d16/2 + the slack the fp16 rounding of d (and m) adds.
void check_q8_0_block(const float* x, const std::string& label) {
  BlockQ8_0 block{};
  kipp::quantize_q8_0(x, &block, kQuantBlock);
  float decoded[kQuantBlock];
  kipp::dequantize_q8_0(&block, decoded, kQuantBlock);
  const ExpectedQ8 expected = expect_q8_0(x);
  ASSERT_EQ(decode_f16(block.scale_f16), expected.d16) << label;
  double amax = 0.0;
  for (size_t i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
  const double bound = expected.d16 / 2 + 127.0 * std::fabs(amax / 127.0 - expected.d16);
  for (size_t i = 0; i < kQuantBlock; ++i) {
    ASSERT_EQ(block.q[i], expected.q[i]) << label << " element " << i << " x=" << x[i];
    ASSERT_EQ(decoded[i], static_cast<float>(expected.d16 * expected.q[i])) << label << " element " << i;
    ASSERT_LE(std::fabs(x[i] - static_cast<double>(decoded[i])), bound * (1 + 1e-12)) << label << " element " << i;
  }
}

void check_affine4_block(const float* x, const std::string& label) {
  BlockAffine4 block{};
  kipp::quantize_affine4(x, &block, kQuantBlock);
  float decoded[kQuantBlock];
  kipp::dequantize_affine4(&block, decoded, kQuantBlock);
  const ExpectedAffine4 expected = expect_affine4(x);
  ASSERT_EQ(decode_f16(block.scale_f16), expected.d16) << label;
  ASSERT_EQ(decode_f16(block.min_f16), expected.m16) << label;
  const double lo = *std::min_element(x, x + kQuantBlock);
  const double hi = *std::max_element(x, x + kQuantBlock);
  const double d_exact = (hi - lo) / 15.0;
  const double slack = 15.0 * std::fabs(d_exact - expected.d16) + std::fabs(lo - expected.m16);
  const double bound = std::max(expected.d16 / 2, slack);
  for (size_t i = 0; i < kQuantBlock; ++i) {
    ASSERT_EQ(nibble(block, i), expected.q[i]) << label << " element " << i << " x=" << x[i];
    const float want = static_cast<float>(expected.d16 * expected.q[i]) + static_cast<float>(expected.m16);
    ASSERT_EQ(decoded[i], want) << label << " element " << i;
    const double sum_rounding = std::fabs(static_cast<double>(want)) * 0x1p-24;
    ASSERT_LE(std::fabs(x[i] - static_cast<double>(decoded[i])), bound * (1 + 1e-12) + sum_rounding)
        << label << " element " << i;
  }
}

std::vector<uint8_t> raw_bytes(const void* block, size_t size) {
  std::vector<uint8_t> out(size);
  std::memcpy(out.data(), block, size);
  return out;
}

// Blocks from several distributions and magnitudes, plus hand-made ones.
std::vector<std::vector<float>> test_blocks() {
  std::vector<std::vector<float>> blocks;
  std::mt19937 rng(1234);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-7.0f, 4.5f);
  for (int b = 0; b < 3000; ++b) {
    const float scale = std::pow(10.0f, log_scale(rng));
    const float offset = (b % 3 == 0) ? scale * uniform(rng) * 4.0f : 0.0f;  // affine4's min matters
    std::vector<float> block(kQuantBlock);
    for (float& v : block) v = offset + scale * (b % 2 ? gauss(rng) : uniform(rng));
    if (b % 5 == 0) block[static_cast<size_t>(b) % kQuantBlock] *= 20.0f;  // an outlier
    blocks.push_back(block);
  }
  std::vector<float> ramp(kQuantBlock);
  for (size_t i = 0; i < kQuantBlock; ++i) ramp[i] = static_cast<float>(i) - 15.5f;
  blocks.push_back(ramp);
  // Exact ties: d = 1, x = k + 0.5 (round half away from zero).
  std::vector<float> ties(kQuantBlock);
  for (size_t i = 0; i < kQuantBlock; ++i) ties[i] = static_cast<float>(i % 8) + 0.5f;
  ties[0] = 127.0f;
  ties[1] = -2.5f;
  blocks.push_back(ties);
  std::vector<float> single(kQuantBlock, 0.0f);
  single[7] = -3.0f;
  blocks.push_back(single);
  return blocks;
}

TEST(QuantQ8_0, MatchesIndependentRestatementAndErrorBound) {
  const auto blocks = test_blocks();
  for (size_t b = 0; b < blocks.size(); ++b) {
    check_q8_0_block(blocks[b].data(), "block " + std::to_string(b));
    if (HasFatalFailure()) return;
  }
}

TEST(QuantAffine4, MatchesIndependentRestatementAndErrorBound) {
  const auto blocks = test_blocks();
  for (size_t b = 0; b < blocks.size(); ++b) {
    check_affine4_block(blocks[b].data(), "block " + std::to_string(b));
    if (HasFatalFailure()) return;
  }
}

TEST(QuantQ8_0, TiesRoundAwayFromZero) {
  // amax = 127 -> d = 1 exactly; 2.5 -> 3, -2.5 -> -3, 0.5 -> 1, -0.5 -> -1.
  std::vector<float> x(kQuantBlock, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -0.5f;
  BlockQ8_0 block{};
  kipp::quantize_q8_0(x.data(), &block, kQuantBlock);
  EXPECT_EQ(block.q[1], 3);
  EXPECT_EQ(block.q[2], -3);
  EXPECT_EQ(block.q[3], 1);
  EXPECT_EQ(block.q[4], -1);
}

TEST(QuantAffine4, TiesRoundHalfUp) {
  // min 0, max 15 -> d = 1, m = 0; (x - m) / d is never negative, so away from zero = up.
  std::vector<float> x(kQuantBlock, 0.0f);
  x[0] = 15.0f;
  x[1] = 0.5f;
  x[2] = 2.5f;
  x[3] = 14.5f;
  x[4] = 7.5f;
  BlockAffine4 block{};
  kipp::quantize_affine4(x.data(), &block, kQuantBlock);
  EXPECT_EQ(nibble(block, 1), 1);
  EXPECT_EQ(nibble(block, 2), 3);
  EXPECT_EQ(nibble(block, 3), 15);
  EXPECT_EQ(nibble(block, 4), 8);
}

TEST(QuantQ8_0, ByteLayout) {
  std::vector<float> x(kQuantBlock);
  for (size_t i = 0; i < kQuantBlock; ++i) x[i] = static_cast<float>(static_cast<int>(i) * 8 - 127);
  x[31] = 127.0f;  // amax 127 -> d = 1.0 = fp16 0x3c00
  BlockQ8_0 block{};
  kipp::quantize_q8_0(x.data(), &block, kQuantBlock);
  const std::vector<uint8_t> bytes = raw_bytes(&block, sizeof block);
  ASSERT_EQ(bytes.size(), 34u);
  EXPECT_EQ(bytes[0], 0x00);  // scale, little-endian fp16, at offset 0
  EXPECT_EQ(bytes[1], 0x3c);
  for (size_t i = 0; i < kQuantBlock; ++i) {
    EXPECT_EQ(static_cast<int8_t>(bytes[2 + i]), static_cast<int>(x[i])) << i;
  }
}

TEST(QuantAffine4, ByteLayoutAndNibbleOrder) {
  // Weights 0..15 then 15..0 with min 0 and max 15: d = 1, m = 0, q equals the weight.
  std::vector<float> x(kQuantBlock);
  for (size_t j = 0; j < 16; ++j) {
    x[j] = static_cast<float>(j);
    x[j + 16] = static_cast<float>(15 - j);
  }
  for (float& v : x) v += -4.0f;  // m = -4 = fp16 0xc400
  BlockAffine4 block{};
  kipp::quantize_affine4(x.data(), &block, kQuantBlock);
  const std::vector<uint8_t> bytes = raw_bytes(&block, sizeof block);
  ASSERT_EQ(bytes.size(), 20u);
  EXPECT_EQ(bytes[0], 0x00);  // d = 1.0 at offset 0
  EXPECT_EQ(bytes[1], 0x3c);
  EXPECT_EQ(bytes[2], 0x00);  // m = -4.0 at offset 2
  EXPECT_EQ(bytes[3], 0xc4);
  for (size_t j = 0; j < 16; ++j) {
    // Weight j in the low nibble of byte j, weight j + 16 in the high nibble.
    const int want = static_cast<int>(j) | ((15 - static_cast<int>(j)) << 4);
    EXPECT_EQ(bytes[4 + j], want) << j;
  }
  float decoded[kQuantBlock];
  kipp::dequantize_affine4(&block, decoded, kQuantBlock);
  for (size_t i = 0; i < kQuantBlock; ++i) EXPECT_EQ(decoded[i], x[i]) << i;
}

TEST(QuantQ8_0, ZeroBlock) {
  std::vector<float> x(kQuantBlock, 0.0f);
  BlockQ8_0 block;
  std::memset(&block, 0xab, sizeof block);
  kipp::quantize_q8_0(x.data(), &block, kQuantBlock);
  EXPECT_EQ(block.scale_f16, 0);
  for (int8_t q : block.q) EXPECT_EQ(q, 0);
  float decoded[kQuantBlock];
  kipp::dequantize_q8_0(&block, decoded, kQuantBlock);
  for (float v : decoded) EXPECT_EQ(v, 0.0f);
}

TEST(QuantAffine4, ZeroBlock) {
  std::vector<float> x(kQuantBlock, 0.0f);
  BlockAffine4 block;
  std::memset(&block, 0xab, sizeof block);
  kipp::quantize_affine4(x.data(), &block, kQuantBlock);
  EXPECT_EQ(block.scale_f16, 0);
  EXPECT_EQ(block.min_f16, 0);
  for (uint8_t b : block.nibbles) EXPECT_EQ(b, 0);
  float decoded[kQuantBlock];
  kipp::dequantize_affine4(&block, decoded, kQuantBlock);
  for (float v : decoded) EXPECT_EQ(v, 0.0f);
}

TEST(QuantQ8_0, ConstantBlock) {
  for (float c : {3.3f, -0.7f, 1e-2f}) {
    std::vector<float> x(kQuantBlock, c);
    check_q8_0_block(x.data(), "constant " + std::to_string(c));
    BlockQ8_0 block{};
    kipp::quantize_q8_0(x.data(), &block, kQuantBlock);
    for (int8_t q : block.q) EXPECT_EQ(std::abs(q), 127);  // amax / d rounds back to 127
  }
}

TEST(QuantAffine4, ConstantBlockDecodesToFp16OfTheConstant) {
  for (float c : {3.3f, -0.7f, 1e-3f, 70000.0f}) {
    std::vector<float> x(kQuantBlock, c);
    BlockAffine4 block{};
    kipp::quantize_affine4(x.data(), &block, kQuantBlock);
    EXPECT_EQ(block.scale_f16, 0);
    for (uint8_t b : block.nibbles) EXPECT_EQ(b, 0);
    float decoded[kQuantBlock];
    kipp::dequantize_affine4(&block, decoded, kQuantBlock);
    const double want = round_to_half(std::clamp(static_cast<double>(c), -kMaxHalf, kMaxHalf));
    for (float v : decoded) EXPECT_EQ(v, want) << c;
  }
}

TEST(QuantQ8_0, ExtremeAndTinyValues) {
  std::vector<float> large(kQuantBlock);
  for (size_t i = 0; i < kQuantBlock; ++i) large[i] = (i % 2 ? -1e4f : 1e4f) * static_cast<float>(i + 1) / 32.0f;
  check_q8_0_block(large.data(), "1e4");
  // d = amax / 127 lands in the fp16 subnormal range: coarse scale, still within the bound.
  std::vector<float> subnormal_scale(kQuantBlock);
  for (size_t i = 0; i < kQuantBlock; ++i) subnormal_scale[i] = 1e-5f * std::sin(static_cast<float>(i) + 1.0f);
  check_q8_0_block(subnormal_scale.data(), "subnormal-range scale");
  // d below half the smallest fp16 subnormal rounds to 0: everything decodes to 0.
  std::vector<float> tiny(kQuantBlock, 1e-9f);
  tiny[3] = -2e-9f;
  check_q8_0_block(tiny.data(), "tiny");
  BlockQ8_0 block{};
  kipp::quantize_q8_0(tiny.data(), &block, kQuantBlock);
  EXPECT_EQ(block.scale_f16, 0);
  // Beyond 65504 * 127 the scale saturates at the largest fp16 and the values saturate too.
  std::vector<float> huge(kQuantBlock, 1.0f);
  huge[0] = 1e30f;
  huge[1] = -std::numeric_limits<float>::max();
  kipp::quantize_q8_0(huge.data(), &block, kQuantBlock);
  EXPECT_EQ(block.scale_f16, 0x7bff);
  float decoded[kQuantBlock];
  kipp::dequantize_q8_0(&block, decoded, kQuantBlock);
  EXPECT_EQ(decoded[0], 65504.0f * 127.0f);
  EXPECT_EQ(decoded[1], -65504.0f * 127.0f);
  for (float v : decoded) EXPECT_TRUE(std::isfinite(v));
}

TEST(QuantAffine4, ExtremeAndTinyValues) {
  std::vector<float> large(kQuantBlock);
  for (size_t i = 0; i < kQuantBlock; ++i) large[i] = (i % 2 ? -1e4f : 1e4f) * static_cast<float>(i + 1) / 32.0f;
  check_affine4_block(large.data(), "1e4");
  std::vector<float> subnormal(kQuantBlock);
  for (size_t i = 0; i < kQuantBlock; ++i) subnormal[i] = 1e-5f * std::sin(static_cast<float>(i) + 1.0f);
  check_affine4_block(subnormal.data(), "subnormal-range scale and min");
  std::vector<float> huge(kQuantBlock, 0.0f);
  huge[0] = 3e38f;
  huge[1] = -3e38f;  // max - min overflows float: the scale saturates
  BlockAffine4 block{};
  kipp::quantize_affine4(huge.data(), &block, kQuantBlock);
  EXPECT_EQ(block.scale_f16, 0x7bff);
  EXPECT_EQ(block.min_f16, 0xfbff);
  float decoded[kQuantBlock];
  kipp::dequantize_affine4(&block, decoded, kQuantBlock);
  EXPECT_EQ(decoded[0], 65504.0f * 15.0f - 65504.0f);
  EXPECT_EQ(decoded[1], -65504.0f);
  for (float v : decoded) EXPECT_TRUE(std::isfinite(v));
}

TEST(QuantQ8_0, NonFiniteInputs) {
  std::vector<float> x(kQuantBlock, 0.25f);
  x[0] = 1.0f;
  x[1] = std::numeric_limits<float>::quiet_NaN();
  x[2] = std::numeric_limits<float>::infinity();
  x[3] = -std::numeric_limits<float>::infinity();
  BlockQ8_0 block{};
  kipp::quantize_q8_0(x.data(), &block, kQuantBlock);
  EXPECT_EQ(decode_f16(block.scale_f16), round_to_half(1.0f / 127.0f));  // from the finite values
  EXPECT_EQ(block.q[0], 127);
  EXPECT_EQ(block.q[1], 0);     // NaN quantized as 0
  EXPECT_EQ(block.q[2], 127);   // +inf saturates
  EXPECT_EQ(block.q[3], -127);  // -inf saturates
  std::vector<float> all_nan(kQuantBlock, std::numeric_limits<float>::quiet_NaN());
  all_nan[5] = std::numeric_limits<float>::infinity();
  kipp::quantize_q8_0(all_nan.data(), &block, kQuantBlock);
  float decoded[kQuantBlock];
  kipp::dequantize_q8_0(&block, decoded, kQuantBlock);
  for (float v : decoded) EXPECT_EQ(v, 0.0f);
}

TEST(QuantAffine4, NonFiniteInputs) {
  std::vector<float> x(kQuantBlock, 1.0f);
  x[0] = -1.0f;  // finite range [-1, 2]: d = 0.2, m = -1
  x[4] = 2.0f;
  x[1] = std::numeric_limits<float>::quiet_NaN();
  x[2] = std::numeric_limits<float>::infinity();
  x[3] = -std::numeric_limits<float>::infinity();
  BlockAffine4 block{};
  kipp::quantize_affine4(x.data(), &block, kQuantBlock);
  EXPECT_EQ(decode_f16(block.min_f16), -1.0);
  const double d16 = decode_f16(block.scale_f16);
  EXPECT_EQ(d16, round_to_half(3.0f / 15.0f));
  EXPECT_EQ(nibble(block, 1), static_cast<int>(round_away(1.0 / d16)));  // NaN quantized as 0.0
  EXPECT_EQ(nibble(block, 2), 15);
  EXPECT_EQ(nibble(block, 3), 0);
  std::vector<float> all_nan(kQuantBlock, std::numeric_limits<float>::quiet_NaN());
  all_nan[9] = -std::numeric_limits<float>::infinity();
  kipp::quantize_affine4(all_nan.data(), &block, kQuantBlock);
  float decoded[kQuantBlock];
  kipp::dequantize_affine4(&block, decoded, kQuantBlock);
  for (float v : decoded) EXPECT_EQ(v, 0.0f);
}

TEST(QuantQ8_0, MultipleBlocksAndEmptyInput) {
  std::vector<float> x(4 * kQuantBlock);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * static_cast<float>(i / kQuantBlock + 1) - 60.0f;
  std::vector<BlockQ8_0> blocks(4);
  kipp::quantize_q8_0(x.data(), blocks.data(), x.size());
  for (size_t b = 0; b < 4; ++b) {
    BlockQ8_0 single{};
    kipp::quantize_q8_0(x.data() + b * kQuantBlock, &single, kQuantBlock);
    EXPECT_EQ(raw_bytes(&single, sizeof single), raw_bytes(&blocks[b], sizeof single)) << b;
  }
  kipp::quantize_q8_0(nullptr, nullptr, 0);  // no blocks: touches nothing
  kipp::dequantize_q8_0(nullptr, nullptr, 0);
  kipp::quantize_affine4(nullptr, nullptr, 0);
  kipp::dequantize_affine4(nullptr, nullptr, 0);
}

// Normalized mean squared error sum (x - x')^2 / sum x^2 over N(0, 1) data.
template <typename Block, typename Quantize, typename Dequantize>
double gaussian_nmse(Quantize quantize, Dequantize dequantize) {
  constexpr size_t kCount = kQuantBlock * 65536;
  std::mt19937 rng(42);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(kCount);
  for (float& v : x) v = gauss(rng);
  std::vector<Block> blocks(kCount / kQuantBlock);
  quantize(x.data(), blocks.data(), kCount);
  std::vector<float> y(kCount);
  dequantize(blocks.data(), y.data(), kCount);
  double error = 0.0;
  double energy = 0.0;
  for (size_t i = 0; i < kCount; ++i) {
    const double diff = static_cast<double>(x[i]) - y[i];
    error += diff * diff;
    energy += static_cast<double>(x[i]) * x[i];
  }
  return error / energy;
}

// Measured (2M N(0,1) samples, mt19937 seed 42, libstdc++): Q8_0 NMSE = 2.86e-05, close to the
// uniform-error model (amax / 127)^2 / 12 with E[amax] ~ 2.1 for 32 normal samples.
TEST(QuantQ8_0, GaussianNmse) {
  const double nmse = gaussian_nmse<BlockQ8_0>(kipp::quantize_q8_0, kipp::dequantize_q8_0);
  std::cout << "Q8_0 NMSE on N(0,1): " << nmse << "\n";
  EXPECT_GT(nmse, 1.5e-5);
  EXPECT_LT(nmse, 5e-5);
}

// Measured (2M N(0,1) samples, mt19937 seed 42, libstdc++): affine4 NMSE = 6.12e-03, close to
// ((max - min) / 15)^2 / 12 with E[max - min] ~ 4.1 for 32 normal samples.
TEST(QuantAffine4, GaussianNmse) {
  const double nmse = gaussian_nmse<BlockAffine4>(kipp::quantize_affine4, kipp::dequantize_affine4);
  std::cout << "affine4 NMSE on N(0,1): " << nmse << "\n";
  EXPECT_GT(nmse, 3e-3);
  EXPECT_LT(nmse, 1.2e-2);
}

}  // namespace
