// The sampler's vocabulary reductions (kernels/cpu/vector_math.h) against plain scalar loops,
// at lengths that leave every possible tail after the vector loop.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/vector_math.h"
#include "unit/helpers/random_values.h"

namespace kipp::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_logits(size_t n, uint32_t seed) { return test_support::normal_values(n, seed, 4.0f); }

TEST(VectorMath, SumExpEqualsTheScalarSumWithinFloatRounding) {
  for (size_t n : {1u, 7u, 16u, 17u, 33u, 1000u, 151936u}) {
    std::vector<float> x = random_logits(n, static_cast<uint32_t>(n));
    if (n > 3) x[n / 2] = -kInf;  // a masked token adds nothing
    const float max = *std::max_element(x.begin(), x.end());
    double expected = 0;
    for (float v : x) expected += std::exp(static_cast<double>(v) - max);
    EXPECT_NEAR(sum_exp(x, max), expected, expected * 1e-6) << n;
  }
  EXPECT_EQ(sum_exp(std::vector<float>(40, -kInf), 0.0f), 0.0);
}

TEST(VectorMath, ScanMaxFindsTheFirstMaximumAtEveryPosition) {
  for (size_t n : {1u, 5u, 16u, 31u, 64u, 151936u}) {
    std::vector<float> x = random_logits(n, 7);
    for (size_t at : {size_t{0}, n / 3, n - 1}) {
      std::vector<float> y = x;
      y[at] = 100.0f;
      if (at + 2 < n) y[at + 2] = 100.0f;  // a later tie does not move it
      const MaxScan scan = scan_max(y);
      ASSERT_TRUE(scan.finite_or_minus_inf);
      EXPECT_EQ(scan.max, 100.0f);
      EXPECT_EQ(scan.first, at) << n;
    }
  }
  const MaxScan masked = scan_max(std::vector<float>(19, -kInf));
  EXPECT_TRUE(masked.finite_or_minus_inf);
  EXPECT_EQ(masked.max, -kInf);
  EXPECT_EQ(masked.first, 0u);
}

TEST(VectorMath, ScanMaxReportsNanAndPlusInfinityAnywhere) {
  for (size_t n : {3u, 16u, 35u}) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), kInf}) {
      for (size_t at : {size_t{0}, n - 1}) {
        std::vector<float> x = random_logits(n, 3);
        x[at] = bad;
        EXPECT_FALSE(scan_max(x).finite_or_minus_inf) << n << " " << at;
      }
    }
  }
}

}  // namespace
}  // namespace kipp::kernels
