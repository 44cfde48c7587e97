// Guards against compiler behaviour the numerics rely on (see the top-level CMakeLists.txt).
#include <gtest/gtest.h>

namespace {

struct TwoDoubles {
  double first;
  double second;
};

// Narrowing two neighbouring doubles to float must round them (GCC 12's SLP vectorizer
// dropped exactly this rounding).
__attribute__((noinline)) TwoDoubles round_both_to_float(TwoDoubles value) {
  value.first = static_cast<float>(value.first);
  value.second = static_cast<float>(value.second);
  return value;
}

TEST(Toolchain, NarrowingToFloatRoundsAdjacentDoubles) {
  const TwoDoubles rounded = round_both_to_float({1e-6, 0.1});
  EXPECT_EQ(rounded.first, static_cast<double>(1e-6f));
  EXPECT_EQ(rounded.second, static_cast<double>(0.1f));
  EXPECT_NE(rounded.first, 1e-6);
}

}  // namespace
