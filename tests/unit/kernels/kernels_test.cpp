// The reference kernels (src/kernels/ref/ops.h), each checked against a plain double-precision
// computation written here. Inputs are random from fixed seeds.
//
// Tolerances: a float32 result carries a relative rounding error of 2^-24 (~6e-8) per
// operation. The longest chain here is a dot product of 1000 terms: 16 lanes of ~63 serial
// additions plus a 4-level pairwise reduction, i.e. about 70 roundings, so its error stays
// below 70 * 6e-8 ~ 4.2e-6 of the sum of |terms|. Every check therefore allows 1e-5 relative to
// the scale of the quantity (the sum of absolute terms, the vector norm, the largest value),
// which passes correct float32 code and fails any indexing or formula mistake by orders of
// magnitude. Where float32 is exact (conversions, a single addition) the check is bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "format/quant.h"
#include "kernels/ref/ops.h"
#include "kernels/weights.h"
#include "unit/helpers/float_formats.h"
#include "unit/helpers/matmul_fixtures.h"

namespace {

using kipp::GgmlType;
using kipp::kernels::KvLayerView;
using kipp::kernels::WeightMatrix;
using kipp::testing::decode_f16;
namespace ref = kipp::kernels::ref;

constexpr double kRelativeTolerance = 1e-5;

std::vector<float> random_floats(std::mt19937& rng, size_t n, float low = -1.0f, float high = 1.0f) {
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

uint32_t float_bits(float value) { return std::bit_cast<uint32_t>(value); }

// bf16 bits -> value, from the format's definition (the top half of a binary32).
double decode_bf16(uint16_t bits) { return static_cast<double>(std::bit_cast<float>(uint32_t{bits} << 16)); }

// The nearest bf16 of a finite float, ties to the even pattern, chosen by comparing distances
// in double (exact here: both candidates and the value are floats).
uint16_t nearest_bf16(float value) {
  const uint32_t bits = float_bits(value);
  const auto truncated = static_cast<uint16_t>(bits >> 16);
  const auto next = static_cast<uint16_t>(truncated + 1);  // one bf16 step away from zero
  const double below = std::fabs(static_cast<double>(value) - decode_bf16(truncated));
  const double above = std::fabs(decode_bf16(next) - static_cast<double>(value));
  if (below < above) return truncated;
  if (above < below) return next;
  return (truncated & 1u) == 0 ? truncated : next;
}

double sum_of_abs_products(const float* a, const double* b, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::fabs(static_cast<double>(a[i]) * b[i]);
  return sum;
}

// ------------------------------------------------------------------ BF16 storage

TEST(KernelBf16, StoreRoundsToNearestEven) {
  // Exact ties between two bf16 values: 1 + 2^-8 sits halfway between 1 (even mantissa) and
  // 1 + 2^-7 (odd): it goes down; 1 + 3 * 2^-8 sits between an odd and an even one: it goes up.
  const float ties[] = {std::bit_cast<float>(0x3f808000u), std::bit_cast<float>(0x3f818000u),
                        std::bit_cast<float>(0xbf808000u)};
  uint16_t stored[3];
  ref::store_bf16(ties, stored, 3);
  EXPECT_EQ(stored[0], 0x3f80);
  EXPECT_EQ(stored[1], 0x3f82);
  EXPECT_EQ(stored[2], 0xbf80);

  // Just above and below a tie round to the nearer side.
  const float near_ties[] = {std::bit_cast<float>(0x3f808001u), std::bit_cast<float>(0x3f807fffu)};
  ref::store_bf16(near_ties, stored, 2);
  EXPECT_EQ(stored[0], 0x3f81);
  EXPECT_EQ(stored[1], 0x3f80);

  std::mt19937 rng(11);
  const std::vector<float> values = random_floats(rng, 4096, -300.0f, 300.0f);
  std::vector<uint16_t> out(values.size());
  ref::store_bf16(values.data(), out.data(), values.size());
  for (size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(out[i], nearest_bf16(values[i])) << "value " << values[i] << " at " << i;

  // Special values survive: infinities stay infinite, NaN stays NaN, zeros keep their sign.
  const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), 0.0f, -0.0f};
  uint16_t special_out[5];
  ref::store_bf16(specials, special_out, 5);
  EXPECT_EQ(special_out[0], 0x7f80);
  EXPECT_EQ(special_out[1], 0xff80);
  EXPECT_TRUE(std::isnan(kipp::bf16_to_f32(special_out[2])));
  EXPECT_EQ(special_out[3], 0x0000);
  EXPECT_EQ(special_out[4], 0x8000);
}

// ------------------------------------------------------------------ dequantize_row

// Rows of one weight matrix in every supported type, with the value each element must decode
// to computed here from the raw bytes.
class KernelDequantize : public ::testing::Test {
 protected:
  static constexpr size_t kRows = 3;
  static constexpr size_t kCols = 96;  // three quant blocks

  void SetUp() override {
    std::mt19937 rng(21);
    source_ = random_floats(rng, kRows * kCols, -2.0f, 2.0f);
  }

  void expect_row_matches(const WeightMatrix& w, const std::vector<double>& expected_all_rows) {
    ASSERT_NE(w.row_bytes, 0u);
    for (size_t r = 0; r < kRows; ++r) {
      std::vector<float> row(kCols, std::numeric_limits<float>::quiet_NaN());
      ref::dequantize_row(w, r, row.data());
      for (size_t c = 0; c < kCols; ++c)
        ASSERT_EQ(static_cast<double>(row[c]), expected_all_rows[r * kCols + c]) << "row " << r << " col " << c;
    }
  }

  std::vector<float> source_;
};

TEST_F(KernelDequantize, F32RowIsCopied) {
  const WeightMatrix w =
      kipp::kernels::make_weight_matrix(GgmlType::F32, reinterpret_cast<const uint8_t*>(source_.data()), kRows, kCols);
  EXPECT_EQ(w.row_bytes, kCols * sizeof(float));
  expect_row_matches(w, std::vector<double>(source_.begin(), source_.end()));
}

TEST_F(KernelDequantize, Bf16Row) {
  std::vector<uint16_t> stored(source_.size());
  std::vector<double> expected(source_.size());
  for (size_t i = 0; i < source_.size(); ++i) {
    stored[i] = nearest_bf16(source_[i]);
    expected[i] = decode_bf16(stored[i]);
  }
  const WeightMatrix w =
      kipp::kernels::make_weight_matrix(GgmlType::BF16, reinterpret_cast<const uint8_t*>(stored.data()), kRows, kCols);
  EXPECT_EQ(w.row_bytes, kCols * 2);
  expect_row_matches(w, expected);
}

TEST_F(KernelDequantize, F16Row) {
  std::vector<uint16_t> stored(source_.size());
  std::vector<double> expected(source_.size());
  for (size_t i = 0; i < source_.size(); ++i) {
    stored[i] = kipp::f32_to_f16(source_[i]);
    expected[i] = decode_f16(stored[i]);
  }
  stored[5] = 0x0001;  // the smallest subnormal, 2^-24
  expected[5] = std::ldexp(1.0, -24);
  stored[6] = 0x8000;  // negative zero
  expected[6] = -0.0;
  const WeightMatrix w =
      kipp::kernels::make_weight_matrix(GgmlType::F16, reinterpret_cast<const uint8_t*>(stored.data()), kRows, kCols);
  expect_row_matches(w, expected);
}

TEST_F(KernelDequantize, Q8_0RowIsScaleTimesCode) {
  std::vector<kipp::BlockQ8_0> blocks(source_.size() / kipp::kQuantBlock);
  kipp::quantize_q8_0(source_.data(), blocks.data(), source_.size());
  std::vector<double> expected(source_.size());
  for (size_t b = 0; b < blocks.size(); ++b)
    for (size_t j = 0; j < kipp::kQuantBlock; ++j)
      expected[b * kipp::kQuantBlock + j] = decode_f16(blocks[b].scale_f16) * blocks[b].q[j];
  // The format's own decoder agrees too (the oracle the loader and converter use).
  std::vector<float> decoded(source_.size());
  kipp::dequantize_q8_0(blocks.data(), decoded.data(), source_.size());
  for (size_t i = 0; i < decoded.size(); ++i) ASSERT_EQ(static_cast<double>(decoded[i]), expected[i]);

  const WeightMatrix w =
      kipp::kernels::make_weight_matrix(GgmlType::Q8_0, reinterpret_cast<const uint8_t*>(blocks.data()), kRows, kCols);
  EXPECT_EQ(w.row_bytes, (kCols / kipp::kQuantBlock) * sizeof(kipp::BlockQ8_0));
  expect_row_matches(w, expected);
}

TEST_F(KernelDequantize, Q4_1RowIsScaleTimesNibblePlusMin) {
  std::vector<kipp::BlockAffine4> blocks(source_.size() / kipp::kQuantBlock);
  kipp::quantize_affine4(source_.data(), blocks.data(), source_.size());
  std::vector<double> expected(source_.size());
  for (size_t b = 0; b < blocks.size(); ++b) {
    const double scale = decode_f16(blocks[b].scale_f16), min = decode_f16(blocks[b].min_f16);
    for (size_t j = 0; j < kipp::kQuantBlock / 2; ++j) {
      // ggml Q4_1: weight j is the low nibble of byte j, weight j + 16 the high one. The
      // product and sum are formed in float like every decoder, then widened.
      const int low = blocks[b].nibbles[j] & 0x0f, high = blocks[b].nibbles[j] >> 4;
      expected[b * kipp::kQuantBlock + j] =
          static_cast<float>(static_cast<float>(scale) * static_cast<float>(low) + static_cast<float>(min));
      expected[b * kipp::kQuantBlock + j + 16] =
          static_cast<float>(static_cast<float>(scale) * static_cast<float>(high) + static_cast<float>(min));
    }
  }
  std::vector<float> decoded(source_.size());
  kipp::dequantize_affine4(blocks.data(), decoded.data(), source_.size());
  for (size_t i = 0; i < decoded.size(); ++i)
    ASSERT_NEAR(static_cast<double>(decoded[i]), expected[i], 1e-6) << i;  // the decoder may fuse d*q+m

  const WeightMatrix w =
      kipp::kernels::make_weight_matrix(GgmlType::Q4_1, reinterpret_cast<const uint8_t*>(blocks.data()), kRows, kCols);
  EXPECT_EQ(w.row_bytes, (kCols / kipp::kQuantBlock) * sizeof(kipp::BlockAffine4));
  // The kernel must decode exactly as the format's decoder does.
  expect_row_matches(w, std::vector<double>(decoded.begin(), decoded.end()));
}

TEST(KernelWeightMatrix, RejectsUnsupportedTypesAndPartialBlocks) {
  const uint8_t bytes[64] = {};
  EXPECT_EQ(kipp::kernels::make_weight_matrix(GgmlType::Q4_0, bytes, 1, 32).row_bytes, 0u);
  EXPECT_EQ(kipp::kernels::make_weight_matrix(GgmlType::Q8_0, bytes, 1, 33).row_bytes, 0u);
  EXPECT_EQ(kipp::kernels::make_weight_matrix(GgmlType::Q4_1, bytes, 1, 16).row_bytes, 0u);
  EXPECT_EQ(kipp::kernels::make_weight_matrix(GgmlType::BF16, bytes, 1, 7).row_bytes, 14u);
}

// ------------------------------------------------------------------ dot products

TEST(KernelDot, MatchesDoubleForAwkwardLengths) {
  std::mt19937 rng(31);
  for (size_t n : {0u, 1u, 2u, 15u, 16u, 17u, 31u, 33u, 1000u}) {
    const std::vector<float> a = random_floats(rng, n), b = random_floats(rng, n);
    double exact = 0;
    for (size_t i = 0; i < n; ++i) exact += static_cast<double>(a[i]) * b[i];
    const std::vector<double> b_wide(b.begin(), b.end());
    const double scale = sum_of_abs_products(a.data(), b_wide.data(), n);
    const float got = ref::dot(a.data(), b.data(), n);
    if (n == 0) {
      EXPECT_EQ(got, 0.0f);
    } else {
      EXPECT_NEAR(got, exact, kRelativeTolerance * scale) << "n = " << n;
    }
  }
}

TEST(KernelDot, Bf16MatchesDoubleForAwkwardLengths) {
  std::mt19937 rng(32);
  for (size_t n : {0u, 1u, 2u, 15u, 16u, 17u, 31u, 33u, 1000u}) {
    const std::vector<float> a = random_floats(rng, n), source = random_floats(rng, n, -4.0f, 4.0f);
    std::vector<uint16_t> b(n);
    std::vector<double> b_wide(n);
    for (size_t i = 0; i < n; ++i) {
      b[i] = nearest_bf16(source[i]);
      b_wide[i] = decode_bf16(b[i]);
    }
    double exact = 0;
    for (size_t i = 0; i < n; ++i) exact += static_cast<double>(a[i]) * b_wide[i];
    const float got = ref::dot_bf16(a.data(), b.data(), n);
    if (n == 0) {
      EXPECT_EQ(got, 0.0f);
    } else {
      EXPECT_NEAR(got, exact, kRelativeTolerance * sum_of_abs_products(a.data(), b_wide.data(), n)) << "n = " << n;
    }
  }
}

TEST(KernelDot, Bf16EqualsFloatDotOfDecodedValues) {
  // Same fixed lane order: decoding b first and calling dot must give the same bits.
  std::mt19937 rng(33);
  const size_t n = 77;
  const std::vector<float> a = random_floats(rng, n), source = random_floats(rng, n);
  std::vector<uint16_t> b(n);
  ref::store_bf16(source.data(), b.data(), n);
  std::vector<float> decoded(n);
  kipp::bf16_to_f32_row(b.data(), decoded.data(), n);
  EXPECT_EQ(float_bits(ref::dot_bf16(a.data(), b.data(), n)), float_bits(ref::dot(a.data(), decoded.data(), n)));
}

// ------------------------------------------------------------------ matmul

// Each weight type with F32 inputs (the reference table's) and with the rounded inputs the fast
// tables prepare for it.
TEST(KernelMatmul, StridedRowsMatchDoubleAndAreIndependentOfRowCount) {
  std::mt19937 rng(41);
  constexpr size_t kOut = 7, kIn = 96, kBatch = 5, kXStride = 100, kOutStride = 11;
  using kipp::kernels::InputFormat;
  for (GgmlType type : {GgmlType::F32, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_1})
    for (InputFormat format : {InputFormat::F32, kipp::kernels::input_format(type)}) {
      SCOPED_TRACE(std::string(kipp::ggml_type_name(type)) + " weights, " +
                   (format == InputFormat::F32 ? "F32" : "rounded") + " inputs");
      const kipp::testing::StoredMatrix m = kipp::testing::make_stored_matrix(type, kOut, kIn, rng);
      ASSERT_NE(m.w.row_bytes, 0u);
      // Inputs with a gap after each row that must not be read: NaN would poison any result.
      const kipp::testing::PreparedRows x = kipp::testing::make_prepared_rows(format, kBatch, kIn, kXStride, rng);
      const float sentinel = -12345.0f;
      std::vector<float> out(kBatch * kOutStride, sentinel);
      ref::matmul(m.w, x.in, out.data(), kOutStride);
      for (size_t o = 0; o < kOut; ++o)
        for (size_t r = 0; r < kBatch; ++r) {
          const kipp::testing::ExactProduct exact = kipp::testing::exact_product(m, x, o, r);
          EXPECT_NEAR(out[r * kOutStride + o], exact.value, kRelativeTolerance * exact.magnitude)
              << "row " << r << " output " << o;
        }
      for (size_t r = 0; r < kBatch; ++r)
        for (size_t o = kOut; o < kOutStride; ++o) EXPECT_EQ(out[r * kOutStride + o], sentinel) << "gap written";

      // The determinism contract: a row's outputs do not depend on how many rows ran together.
      for (size_t r = 0; r < kBatch; ++r) {
        kipp::kernels::PreparedInput alone_in = x.in;
        alone_in.rows = 1;
        alone_in.f32 += r * kXStride;
        if (x.in.bf16 != nullptr) alone_in.bf16 += r * kIn;
        if (x.in.q8 != nullptr) {
          alone_in.q8 += r * kIn;
          alone_in.q8_scale += r * kIn / 32;
          alone_in.q8_sum += r * kIn / 32;
          alone_in.q8_scaled_sum += r * kIn / 32;
        }
        if (x.in.f32 == nullptr) alone_in.f32 = nullptr;
        std::vector<float> alone(kOut);
        ref::matmul(m.w, alone_in, alone.data(), kOut);
        for (size_t o = 0; o < kOut; ++o)
          EXPECT_EQ(float_bits(alone[o]), float_bits(out[r * kOutStride + o])) << "row " << r << " output " << o;
      }
    }
}

TEST(KernelPrepareInput, Bf16IsNearestEvenAndQ8IsScaledRoundedCodes) {
  std::mt19937 rng(43);
  constexpr size_t kRows = 3, kCols = 64;
  const kipp::testing::PreparedRows bf16 =
      kipp::testing::make_prepared_rows(kipp::kernels::InputFormat::BF16, kRows, kCols, kCols, rng);
  for (size_t i = 0; i < kRows * kCols; ++i) ASSERT_EQ(bf16.in.bf16[i], nearest_bf16(bf16.source[i])) << i;

  kipp::testing::PreparedRows q8 =
      kipp::testing::make_prepared_rows(kipp::kernels::InputFormat::Q8, kRows, kCols, kCols, rng);
  for (size_t block = 0; block < kRows * kCols / 32; ++block) {
    double largest = 0;
    for (size_t i = 0; i < 32; ++i) largest = std::max(largest, std::fabs(double{q8.source[block * 32 + i]}));
    EXPECT_EQ(q8.in.q8_scale[block], static_cast<float>(largest) / 127.0f) << block;
    int32_t sum = 0;
    for (size_t i = 0; i < 32; ++i) {
      const double scaled = q8.source[block * 32 + i] * double{127.0f / static_cast<float>(largest)};
      EXPECT_LE(std::fabs(q8.in.q8[block * 32 + i] - scaled), 0.5 + 1e-6) << block << " " << i;
      sum += q8.in.q8[block * 32 + i];
    }
    EXPECT_EQ(q8.in.q8_sum[block], sum);
    EXPECT_EQ(q8.in.q8_scaled_sum[block], q8.in.q8_scale[block] * static_cast<float>(sum));
  }
  // An all-zero block has scale 0 and codes 0 (no division by zero).
  std::vector<float> zeros(32, 0.0f);
  std::vector<float> storage(kipp::kernels::prepared_input_bytes(kipp::kernels::InputFormat::Q8, 1, 32) / 4 + 1);
  const auto in = ref::prepare_input(kipp::kernels::InputFormat::Q8, zeros.data(), 1, 32, 32, storage.data());
  EXPECT_EQ(in.q8_scale[0], 0.0f);
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(in.q8[i], 0);
}

// ------------------------------------------------------------------ norms

void expect_rms_norm_matches(const float* x, const float* weight, const float* got, size_t n, double eps) {
  double sum_squares = 0;
  for (size_t i = 0; i < n; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
  const double inverse_rms = 1.0 / std::sqrt(sum_squares / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) {
    const double exact = static_cast<double>(x[i]) * inverse_rms * weight[i];
    EXPECT_NEAR(got[i], exact, kRelativeTolerance * std::fabs(exact) + 1e-12) << i;
  }
}

TEST(KernelRmsNorm, MatchesDoubleAndWorksInPlace) {
  std::mt19937 rng(51);
  for (size_t n : {1u, 64u, 1000u}) {
    const std::vector<float> x = random_floats(rng, n, -30.0f, 30.0f), weight = random_floats(rng, n, 0.5f, 1.5f);
    std::vector<float> out(n);
    ref::rms_norm(x.data(), weight.data(), out.data(), n, 1e-6f);
    expect_rms_norm_matches(x.data(), weight.data(), out.data(), n, static_cast<double>(1e-6f));
    std::vector<float> in_place = x;
    ref::rms_norm(in_place.data(), weight.data(), in_place.data(), n, 1e-6f);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(float_bits(in_place[i]), float_bits(out[i]));
  }
  // eps matters for a tiny vector: all zeros stay zeros (no division by zero).
  const std::vector<float> zeros(8, 0.0f), ones(8, 1.0f);
  std::vector<float> out(8, 1.0f);
  ref::rms_norm(zeros.data(), ones.data(), out.data(), 8, 1e-6f);
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(KernelRmsNorm, QkNormIsRmsNormPerHead) {
  // Qwen3 normalizes each head of q and k on its own with one head_dim weight vector.
  std::mt19937 rng(52);
  constexpr size_t kHeads = 4, kHeadDim = 32;
  std::vector<float> q = random_floats(rng, kHeads * kHeadDim, -5.0f, 5.0f);
  for (size_t i = 0; i < kHeadDim; ++i) q[2 * kHeadDim + i] *= 100.0f;  // heads of different scale
  const std::vector<float> original = q, weight = random_floats(rng, kHeadDim, 0.5f, 1.5f);
  for (size_t h = 0; h < kHeads; ++h)
    ref::rms_norm(q.data() + h * kHeadDim, weight.data(), q.data() + h * kHeadDim, kHeadDim, 1e-6f);
  for (size_t h = 0; h < kHeads; ++h) {
    SCOPED_TRACE(h);
    expect_rms_norm_matches(original.data() + h * kHeadDim, weight.data(), q.data() + h * kHeadDim, kHeadDim,
                            static_cast<double>(1e-6f));
  }
}

// ------------------------------------------------------------------ RoPE

TEST(KernelRope, AnglesMatchDouble) {
  constexpr size_t kHeadDim = 128;
  for (double theta : {10000.0, 1000000.0}) {
    for (size_t position : {0u, 1u, 7u, 1000u, 40959u}) {
      float cos_out[kHeadDim / 2], sin_out[kHeadDim / 2];
      ref::rope_angles(position, kHeadDim, theta, cos_out, sin_out);
      for (size_t i = 0; i < kHeadDim / 2; ++i) {
        const double angle = static_cast<double>(position) / std::pow(theta, 2.0 * static_cast<double>(i) / kHeadDim);
        // The kernel rounds the double cos/sin to float once: half a float ulp of a value <= 1.
        EXPECT_NEAR(cos_out[i], std::cos(angle), 1e-7) << "position " << position << " i " << i;
        EXPECT_NEAR(sin_out[i], std::sin(angle), 1e-7) << "position " << position << " i " << i;
      }
    }
  }
}

TEST(KernelRope, RotatesHalvesLikeDouble) {
  std::mt19937 rng(61);
  constexpr size_t kHeads = 3, kHeadDim = 64, kHalf = kHeadDim / 2;
  for (size_t position : {0u, 5u, 3000u}) {
    std::vector<float> x = random_floats(rng, kHeads * kHeadDim, -3.0f, 3.0f);
    const std::vector<float> original = x;
    float cos_v[kHalf], sin_v[kHalf];
    ref::rope_angles(position, kHeadDim, 10000.0, cos_v, sin_v);
    ref::rope(x.data(), kHeads, kHeadDim, cos_v, sin_v);
    for (size_t h = 0; h < kHeads; ++h) {
      const float* in = original.data() + h * kHeadDim;
      for (size_t i = 0; i < kHalf; ++i) {
        const double c = cos_v[i], s = sin_v[i];
        const double first = in[i] * c - in[i + kHalf] * s;
        const double second = in[i + kHalf] * c + in[i] * s;
        const double scale = std::fabs(in[i]) + std::fabs(in[i + kHalf]);
        EXPECT_NEAR(x[h * kHeadDim + i], first, kRelativeTolerance * scale) << "head " << h << " i " << i;
        EXPECT_NEAR(x[h * kHeadDim + i + kHalf], second, kRelativeTolerance * scale) << "head " << h << " i " << i;
      }
    }
    if (position == 0) {  // the identity rotation
      for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], original[i]);
    }
  }
}

// ------------------------------------------------------------------ softmax

void expect_softmax_matches(const std::vector<float>& input) {
  std::vector<float> got = input;
  ref::softmax(got.data(), got.size());
  const double max_value = *std::max_element(input.begin(), input.end());
  double denominator = 0;
  for (float v : input) denominator += std::exp(static_cast<double>(v) - max_value);
  double total = 0;
  for (size_t i = 0; i < input.size(); ++i) {
    const double exact = std::exp(static_cast<double>(input[i]) - max_value) / denominator;
    ASSERT_TRUE(std::isfinite(got[i])) << i;
    EXPECT_NEAR(got[i], exact, kRelativeTolerance * exact + 1e-30) << i;
    total += got[i];
  }
  EXPECT_NEAR(total, 1.0, 1e-5);
}

TEST(KernelSoftmax, MatchesDoubleAndSumsToOne) {
  std::mt19937 rng(71);
  expect_softmax_matches(random_floats(rng, 37, -8.0f, 8.0f));
  expect_softmax_matches(random_floats(rng, 1000, -3.0f, 3.0f));
  expect_softmax_matches({0.25f});
}

TEST(KernelSoftmax, LargeValuesDoNotOverflow) {
  // exp(1000) overflows float and double: the kernel must subtract the maximum first.
  expect_softmax_matches({1000.0f, 999.0f, 1001.0f, 998.5f});
  expect_softmax_matches({-1000.0f, -1001.0f, -999.0f});
  expect_softmax_matches({1000.0f, -1000.0f, 0.0f});
  std::vector<float> equal(5, 1000.0f);
  ref::softmax(equal.data(), equal.size());
  for (float v : equal) EXPECT_EQ(v, 0.2f);
}

// ------------------------------------------------------------------ attention

// A K/V slab of `blocks` blocks of 32 positions for two layers, laid out as the CPU backend
// does ([layer][K|V][position][kv_head][head_dim] BF16 per block), with logical block b at
// physical block placement[b]. Positions past `filled` hold NaN: a causal kernel never reads them.
struct KvFixture {
  static constexpr size_t kLayers = 2;
  size_t kv_heads, head_dim, blocks;
  std::vector<uint16_t> slab;
  std::vector<const uint16_t*> table;

  size_t kv_width() const { return kv_heads * head_dim; }
  size_t layer_elements() const { return 2 * kipp::kernels::kKvBlockPositions * kv_width(); }
  size_t block_elements() const { return kLayers * layer_elements(); }
  KvLayerView view(size_t layer) const {
    return KvLayerView{table.data(),
                       layer * layer_elements(),
                       layer * layer_elements() + kipp::kernels::kKvBlockPositions * kv_width(),
                       kv_heads,
                       head_dim,
                       kv_width()};
  }

  // keys/values: [position][kv_head][head_dim] floats for `filled` positions of `layer`.
  KvFixture(size_t kv_heads_, size_t head_dim_, size_t blocks_, const std::vector<size_t>& placement, size_t layer,
            const std::vector<float>& keys, const std::vector<float>& values, size_t filled)
      : kv_heads(kv_heads_), head_dim(head_dim_), blocks(blocks_) {
    slab.assign(blocks * block_elements(), 0x7fc0);  // bf16 quiet NaN everywhere not written
    table.resize(blocks);
    for (size_t b = 0; b < blocks; ++b) table[b] = slab.data() + placement[b] * block_elements();
    const KvLayerView v = view(layer);
    for (size_t t = 0; t < filled; ++t) {
      auto* block = const_cast<uint16_t*>(table[t / kipp::kernels::kKvBlockPositions]);
      const size_t slot = (t % kipp::kernels::kKvBlockPositions) * kv_width();
      ref::store_bf16(keys.data() + t * kv_width(), block + v.k_offset + slot, kv_width());
      ref::store_bf16(values.data() + t * kv_width(), block + v.v_offset + slot, kv_width());
    }
  }
};

TEST(KernelAttention, CausalGqaOverScrambledBlocksMatchesDouble) {
  constexpr size_t kHeads = 4, kKvHeads = 2, kHeadDim = 32, kBlocks = 5, kLayer = 1;
  constexpr size_t kPositions = kBlocks * kipp::kernels::kKvBlockPositions;
  constexpr size_t kFilled = 150;  // the last block partly written, the rest NaN
  const size_t kv_width = kKvHeads * kHeadDim;
  std::mt19937 rng(81);
  const std::vector<float> keys = random_floats(rng, kPositions * kv_width, -2.0f, 2.0f);
  const std::vector<float> values = random_floats(rng, kPositions * kv_width, -3.0f, 3.0f);
  const KvFixture scrambled(kKvHeads, kHeadDim, kBlocks, {3, 0, 4, 2, 1}, kLayer, keys, values, kFilled);
  const KvFixture in_order(kKvHeads, kHeadDim, kBlocks, {0, 1, 2, 3, 4}, kLayer, keys, values, kFilled);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));

  for (size_t length : {1u, 31u, 32u, 33u, 97u, 150u}) {
    SCOPED_TRACE(length);
    const std::vector<float> q = random_floats(rng, kHeads * kHeadDim, -2.0f, 2.0f);
    std::vector<float> scores(length), out(kHeads * kHeadDim), out_in_order(kHeads * kHeadDim);
    ref::attention(q.data(), kHeads, scrambled.view(kLayer), length, scale, scores.data(), out.data());
    ref::attention(q.data(), kHeads, in_order.view(kLayer), length, scale, scores.data(), out_in_order.data());

    for (size_t h = 0; h < kHeads; ++h) {
      const size_t kv_head = h / (kHeads / kKvHeads);  // heads 0,1 -> kv 0; heads 2,3 -> kv 1
      // The expectation reads the bf16 values the cache holds, decoded exactly.
      auto cached = [&](const std::vector<float>& source, size_t t, size_t d) {
        return decode_bf16(nearest_bf16(source[t * kv_width + kv_head * kHeadDim + d]));
      };
      std::vector<double> logits(length);
      for (size_t t = 0; t < length; ++t) {
        double dot = 0;
        for (size_t d = 0; d < kHeadDim; ++d) dot += static_cast<double>(q[h * kHeadDim + d]) * cached(keys, t, d);
        logits[t] = dot * scale;
      }
      const double max_logit = *std::max_element(logits.begin(), logits.end());
      double denominator = 0;
      for (double l : logits) denominator += std::exp(l - max_logit);
      for (size_t d = 0; d < kHeadDim; ++d) {
        double exact = 0, magnitude = 0;
        for (size_t t = 0; t < length; ++t) {
          const double p = std::exp(logits[t] - max_logit) / denominator;
          exact += p * cached(values, t, d);
          magnitude += p * std::fabs(cached(values, t, d));
        }
        ASSERT_TRUE(std::isfinite(out[h * kHeadDim + d])) << "read past the causal length";
        EXPECT_NEAR(out[h * kHeadDim + d], exact, kRelativeTolerance * magnitude + 1e-7) << "head " << h << " d " << d;
      }
    }
    // Where a block lives in memory does not change a bit of the result.
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(float_bits(out[i]), float_bits(out_in_order[i])) << i;
  }
}

// ------------------------------------------------------------------ elementwise

TEST(KernelSwiglu, MatchesDouble) {
  std::mt19937 rng(91);
  std::vector<float> gate = random_floats(rng, 200, -10.0f, 10.0f);
  const std::vector<float> up = random_floats(rng, 200, -3.0f, 3.0f);
  gate[0] = -100.0f;  // exp(100) overflows float: silu must still give -0, not NaN
  gate[1] = 100.0f;
  gate[2] = 0.0f;
  std::vector<float> out(gate.size());
  ref::swiglu(gate.data(), up.data(), out.data(), gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double exact = g / (1.0 + std::exp(-g)) * up[i];
    ASSERT_TRUE(std::isfinite(out[i])) << i;
    EXPECT_NEAR(out[i], exact, kRelativeTolerance * std::fabs(exact) + 1e-30) << "gate " << g;
  }
  // In place over the gate, as the backend calls it.
  std::vector<float> in_place = gate;
  ref::swiglu(in_place.data(), up.data(), in_place.data(), gate.size());
  for (size_t i = 0; i < gate.size(); ++i) EXPECT_EQ(float_bits(in_place[i]), float_bits(out[i]));
}

TEST(KernelAdd, IsExactFloatAddition) {
  // One float addition is correctly rounded; the double sum rounded to float is the same value
  // (double has more than 2 * 24 + 2 bits, so double rounding is innocuous).
  std::mt19937 rng(101);
  std::vector<float> acc = random_floats(rng, 513, -100.0f, 100.0f);
  const std::vector<float> original = acc, x = random_floats(rng, 513, -1.0f, 1.0f);
  ref::add(acc.data(), x.data(), acc.size());
  for (size_t i = 0; i < acc.size(); ++i)
    EXPECT_EQ(acc[i], static_cast<float>(static_cast<double>(original[i]) + x[i])) << i;
}

}  // namespace
