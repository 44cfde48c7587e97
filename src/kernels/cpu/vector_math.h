// Reductions over whole vocabularies for the sampler, in the widest SIMD this CPU has (Google
// Highway, chosen at run time). A scalar loop of std::exp over a whole vocabulary is a visible
// cost per token, which a server decoding many sequences pays once for each between its
// batched steps.
#pragma once

#include <span>

#include <cstddef>

namespace kipp::kernels {

struct MaxScan {
  bool finite_or_minus_inf = true;  // no NaN and no +inf in x (when false, max and first are unset)
  float max = 0;                    // the largest element (-inf when every one is)
  size_t first = 0;                 // the lowest index holding it
};

// The maximum of a non-empty x and where it first occurs, checking every element on the way.
MaxScan scan_max(std::span<const float> x);

// The sum of exp(x[i] - shift) in double: each exp in float (within 1 ULP of std::exp), the
// sum in double, so the result differs from a scalar loop's only in the last bits. -inf terms
// add 0; x[i] - shift must not exceed +88 (shift >= the maximum keeps every term <= 1).
double sum_exp(std::span<const float> x, float shift);

}  // namespace kipp::kernels
