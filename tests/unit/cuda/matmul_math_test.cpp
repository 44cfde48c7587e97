// The arithmetic the CUDA product kernels run (kernels/cuda/matmul_math.h, host and device
// alike), run here on the CPU against kernels/ref: input quantization, FP16/BF16 conversions,
// weight block decoding, the exact block dot and the float step, all bit for bit. The Q8 block
// maximum and code sum are formed both in the reference's sequence and in the kernel's warp
// butterfly order, which must not matter for max and integer sums.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/half.h"
#include "format/quant.h"
#include "kernels/cuda/matmul_math.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/q8_rows.h"
#include "unit/helpers/random_values.h"

namespace kipp::cuda {
namespace {

using test_support::normal_values;

constexpr size_t kBlock = 32;

// A block of values drawn from one of several regimes, including the edge cases of the
// quantizer: zeros, subnormals (127 / largest overflows), huge values, inf and NaN.
std::vector<float> random_block(std::mt19937& random, int regime) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 31);
  std::vector<float> v(kBlock);
  for (float& x : v) x = normal(random);
  const float inf = std::numeric_limits<float>::infinity();
  switch (regime % 8) {
    case 0: break;
    case 1: std::fill(v.begin(), v.end(), 0.0f); break;
    case 2:
      for (float& x : v) x *= 1e-39f;
      break;  // subnormal block
    case 3:
      for (float& x : v) x *= 1e37f;
      break;
    case 4: v[pick(random)] = inf; break;
    case 5: v[pick(random)] = std::numeric_limits<float>::quiet_NaN(); break;
    case 6: v[pick(random)] = -inf, v[pick(random)] = std::numeric_limits<float>::quiet_NaN(); break;
    case 7:  // largest 127, so the codes are the values: every x.5 a tie, rounded to even
      for (size_t i = 0; i < kBlock; ++i) v[i] = static_cast<float>(i) - 16.5f;
      v[0] = 127.0f;
      break;
  }
  return v;
}

// The kernel's order: fmax and integer sums reduced across 32 lanes by a butterfly.
float butterfly_max(std::vector<float> lanes) {
  for (size_t offset = 16; offset > 0; offset /= 2)
    for (size_t i = 0; i < kBlock; ++i)
      if ((i & offset) == 0) lanes[i] = lanes[i ^ offset] = fmaxf(lanes[i], lanes[i ^ offset]);
  return lanes[0];
}

TEST(CudaMatmulMath, Q8BlockQuantizationIsTheReferenceBitForBit) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 4000; ++trial) {
    const std::vector<float> x = random_block(random, trial);
    int8_t codes[kBlock];
    float scale = 0, scaled_sum = 0;
    int32_t sum = 0;
    kernels::ref::quantize_q8_rows(x.data(), 1, kBlock, kBlock, codes, &scale, &sum, &scaled_sum);

    std::vector<float> magnitudes(kBlock);
    float sequential = 0;
    for (size_t i = 0; i < kBlock; ++i) {
      magnitudes[i] = math::max_magnitude(0.0f, x[i]);
      sequential = math::max_magnitude(sequential, x[i]);
    }
    const float largest = butterfly_max(magnitudes);
    ASSERT_EQ(std::bit_cast<uint32_t>(largest), std::bit_cast<uint32_t>(sequential)) << "trial " << trial;
    const float inverse = math::q8_inverse(largest);
    int32_t code_sum = 0;
    for (size_t i = 0; i < kBlock; ++i) {
      const int8_t code = math::q8_code(x[i], inverse);
      ASSERT_EQ(code, codes[i]) << "trial " << trial << " value " << x[i];
      code_sum += code;
    }
    const float device_scale = math::q8_scale(largest);
    EXPECT_EQ(std::bit_cast<uint32_t>(device_scale), std::bit_cast<uint32_t>(scale)) << "trial " << trial;
    EXPECT_EQ(std::bit_cast<uint32_t>(math::q8_scaled_sum(device_scale, code_sum)), std::bit_cast<uint32_t>(scaled_sum))
        << "trial " << trial;
  }
}

TEST(CudaMatmulMath, HalfConversionsAreCoreHalf) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto half = static_cast<uint16_t>(bits);
    ASSERT_EQ(std::bit_cast<uint32_t>(math::f16_to_float(half)), std::bit_cast<uint32_t>(f16_to_f32(half))) << bits;
    ASSERT_EQ(std::bit_cast<uint32_t>(math::bf16_to_float(half)), std::bit_cast<uint32_t>(bf16_to_f32(half))) << bits;
  }
  std::mt19937 random(11);
  for (int i = 0; i < 1000000; ++i) {
    const float value = std::bit_cast<float>(static_cast<uint32_t>(random()));  // every class, NaN included
    ASSERT_EQ(math::float_to_bf16(value), f32_to_bf16(value)) << std::bit_cast<uint32_t>(value);
  }
}

// Q8 inputs of `rows` rows from random values, prepared by the reference.
struct Inputs {
  std::vector<int8_t> codes;
  std::vector<float> scales, scaled_sums;
  std::vector<int32_t> sums;
  kernels::PreparedInput view;
};

Inputs q8_inputs(size_t cols, std::mt19937& random) {
  Inputs in;
  std::vector<float> x;
  for (size_t b = 0; b < cols / kBlock; ++b) {
    const std::vector<float> block = random_block(random, static_cast<int>(b % 4 == 3 ? 1 : b % 4));  // finite
    x.insert(x.end(), block.begin(), block.end());
  }
  in.codes.resize(cols);
  in.scales.resize(cols / kBlock);
  in.sums.resize(cols / kBlock);
  in.scaled_sums.resize(cols / kBlock);
  kernels::ref::quantize_q8_rows(x.data(), 1, cols, cols, in.codes.data(), in.scales.data(), in.sums.data(),
                                 in.scaled_sums.data());
  in.view.format = kernels::InputFormat::Q8;
  in.view.rows = 1;
  in.view.cols = cols;
  in.view.q8 = in.codes.data();
  in.view.q8_scale = in.scales.data();
  in.view.q8_sum = in.sums.data();
  in.view.q8_scaled_sum = in.scaled_sums.data();
  return in;
}

// Input block b's codes as the eight little-endian words the kernels load.
std::vector<int32_t> input_words(const Inputs& in, size_t b) {
  std::vector<int32_t> words(8);
  std::memcpy(words.data(), in.codes.data() + b * kBlock, kBlock);
  return words;
}

// Raw random bytes: every code (Q8_0's -128 too) and every FP16 scale and min bit pattern
// that is finite (subnormals included), as a file may hold them.
template <typename Block>
std::vector<Block> random_blocks(size_t count, std::mt19937& random) {
  std::vector<Block> blocks(count);
  auto* bytes = reinterpret_cast<uint8_t*>(blocks.data());
  for (size_t i = 0; i < count * sizeof(Block); ++i) bytes[i] = static_cast<uint8_t>(random());
  for (Block& block : blocks) {
    block.scale_f16 &= 0xbfffu;  // exponent at most 15: finite, below 2, subnormals included
    if constexpr (sizeof(Block) == sizeof(BlockAffine4)) block.min_f16 &= 0xbfffu;
  }
  return blocks;
}

TEST(CudaMatmulMath, Q8_0BlockStepsAreTheReferenceBitForBit) {
  std::mt19937 random(3);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t cols = kBlock * (1 + trial % 40);
    const Inputs in = q8_inputs(cols, random);
    const std::vector<BlockQ8_0> w = random_blocks<BlockQ8_0>(cols / kBlock, random);
    float sum = 0;
    for (size_t b = 0; b < cols / kBlock; ++b) {
      const math::WeightBlock block = math::load_q8_0(reinterpret_cast<const uint8_t*>(&w[b]));
      const int32_t dot = math::block_dot(block, input_words(in, b).data());
      sum = math::add(sum, math::q8_0_term(block.scale, in.scales[b], dot));
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(sum), std::bit_cast<uint32_t>(kernels::ref::dot_q8_0_row(w.data(), in.view, 0)))
        << "trial " << trial;
  }
}

TEST(CudaMatmulMath, Affine4BlockStepsAreTheReferenceBitForBit) {
  std::mt19937 random(5);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t cols = kBlock * (1 + trial % 40);
    const Inputs in = q8_inputs(cols, random);
    const std::vector<BlockAffine4> w = random_blocks<BlockAffine4>(cols / kBlock, random);
    float sum = 0;
    for (size_t b = 0; b < cols / kBlock; ++b) {
      const math::WeightBlock block = math::load_affine4(reinterpret_cast<const uint8_t*>(&w[b]));
      const int32_t dot = math::block_dot(block, input_words(in, b).data());
      sum = math::add(sum, math::affine4_term(block.scale, block.min, in.scales[b], dot, in.scaled_sums[b]));
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(sum),
              std::bit_cast<uint32_t>(kernels::ref::dot_affine4_row(w.data(), in.view, 0)))
        << "trial " << trial;
  }
}

TEST(CudaMatmulMath, BlockDotIsTheIntegerDot) {
  std::mt19937 random(9);
  for (int trial = 0; trial < 1000; ++trial) {
    const std::vector<BlockQ8_0> w = random_blocks<BlockQ8_0>(1, random);
    int8_t x[kBlock];
    for (int8_t& c : x) c = static_cast<int8_t>(random());
    int32_t words[8];
    std::memcpy(words, x, sizeof x);
    int32_t expected = 0;
    for (size_t i = 0; i < kBlock; ++i) expected += int32_t{w[0].q[i]} * x[i];
    ASSERT_EQ(math::block_dot(math::load_q8_0(reinterpret_cast<const uint8_t*>(w.data())), words), expected);
  }
}

TEST(CudaMatmulMath, SwigluIsTheReference) {
  const std::vector<float> gate = normal_values(10000, 13, 4.0f), up = normal_values(10000, 17, 1.0f);
  std::vector<float> expected(gate.size());
  kernels::ref::swiglu(gate.data(), up.data(), expected.data(), gate.size());
  for (size_t i = 0; i < gate.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(math::swiglu(gate[i], up[i])), std::bit_cast<uint32_t>(expected[i])) << i;
}

}  // namespace
}  // namespace kipp::cuda
