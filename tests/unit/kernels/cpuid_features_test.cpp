// The CPUID reads that stand in for __builtin_cpu_supports names clang lacks agree with GCC's
// own checks wherever the kernels use them: next to a check of AVX2 (which covers OS support).
#include <gtest/gtest.h>

#if defined(__x86_64__)
#include "kernels/cpu/cpuid_features.h"
#endif

namespace kipp {
namespace {

TEST(CpuidFeatures, AgreeWithGccBuiltinsBesideAvx2) {
#if defined(__x86_64__) && !defined(__clang__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2");
  EXPECT_EQ(avx2 && kernels::cpu_has_f16c(), avx2 && __builtin_cpu_supports("f16c"));
  EXPECT_EQ(avx2 && kernels::cpu_has_avx_vnni(), avx2 && __builtin_cpu_supports("avxvnni"));
#else
  GTEST_SKIP() << "needs GCC on x86-64 (its __builtin_cpu_supports is the oracle)";
#endif
}

}  // namespace
}  // namespace kipp
