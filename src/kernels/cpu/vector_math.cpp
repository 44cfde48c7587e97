#include "kernels/cpu/vector_math.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

// Highway needs this order: the target list, then highway.h, then its -inl headers.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/vector_math.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kipp::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

double SumExp(const float* x, size_t n, float shift) {
  // Floats as wide as the double vectors they widen into; two sums so the adds overlap.
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t lanes = hn::Lanes(dd);
  const auto minus_shift = hn::Set(df, -shift);
  auto sum0 = hn::Zero(dd), sum1 = hn::Zero(dd);
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    sum0 = hn::Add(sum0, hn::PromoteTo(dd, hn::Exp(df, hn::Add(hn::LoadU(df, x + i), minus_shift))));
    sum1 = hn::Add(sum1, hn::PromoteTo(dd, hn::Exp(df, hn::Add(hn::LoadU(df, x + i + lanes), minus_shift))));
  }
  double total = hn::GetLane(hn::SumOfLanes(dd, hn::Add(sum0, sum1)));
  for (; i < n; ++i) total += static_cast<double>(std::exp(x[i] - shift));
  return total;
}

void ScanMax(const float* x, size_t n, MaxScan* scan) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto inf = hn::Set(d, HUGE_VALF);
  auto max = hn::Set(d, -HUGE_VALF);
  auto valid = hn::FirstN(d, lanes);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, x + i);
    valid = hn::And(valid, hn::Lt(v, inf));  // false for NaN and +inf
    max = hn::Max(max, v);
  }
  float best = hn::GetLane(hn::MaxOfLanes(d, max));
  bool all_valid = hn::AllTrue(d, valid);
  for (; i < n; ++i) {
    all_valid = all_valid && x[i] < HUGE_VALF;
    best = std::max(best, x[i]);
  }
  scan->finite_or_minus_inf = all_valid;
  if (!all_valid) return;
  scan->max = best;
  const auto wanted = hn::Set(d, best);
  for (i = 0; i + lanes <= n; i += lanes) {
    const intptr_t at = hn::FindFirstTrue(d, hn::Eq(hn::LoadU(d, x + i), wanted));
    if (at >= 0) {
      scan->first = i + static_cast<size_t>(at);
      return;
    }
  }
  while (x[i] != best) ++i;
  scan->first = i;
}

}  // namespace kipp::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kipp::kernels {

HWY_EXPORT(SumExp);
HWY_EXPORT(ScanMax);

MaxScan scan_max(std::span<const float> x) {
  MaxScan scan;
  HWY_DYNAMIC_DISPATCH(ScanMax)(x.data(), x.size(), &scan);
  return scan;
}

double sum_exp(std::span<const float> x, float shift) {
  return HWY_DYNAMIC_DISPATCH(SumExp)(x.data(), x.size(), shift);
}

}  // namespace kipp::kernels
#endif  // HWY_ONCE
