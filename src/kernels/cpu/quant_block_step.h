// The reference's float step for one 32-column block of a quantized product (ref/q8_rows.h), in
// 16 lanes (AVX-512) or 8 (AVX) at once: acc += (d_w * d_x) * float(block sum) [+ min_w * (d_x *
// input code sum)]. Shared by the integer kernels so all give the reference's bits; a file that
// includes it must be compiled with -ffp-contract=off (a fused multiply-add would round once,
// not twice).
#pragma once

#include <immintrin.h>

namespace kipp::kernels::cpu {

template <bool Affine>
__attribute__((target("avx512f"), always_inline)) inline __m512 add_block(__m512 acc, __m512 scales, __m512 mins,
                                                                          __m512i sums, float x_scale,
                                                                          float x_scaled_sum) {
  __m512 term = _mm512_mul_ps(_mm512_mul_ps(scales, _mm512_set1_ps(x_scale)), _mm512_cvtepi32_ps(sums));
  if constexpr (Affine) term = _mm512_add_ps(term, _mm512_mul_ps(mins, _mm512_set1_ps(x_scaled_sum)));
  return _mm512_add_ps(acc, term);
}

template <bool Affine>
__attribute__((target("avx"), always_inline)) inline __m256 add_block(__m256 acc, __m256 scales, __m256 mins,
                                                                      __m256i sums, float x_scale, float x_scaled_sum) {
  __m256 term = _mm256_mul_ps(_mm256_mul_ps(scales, _mm256_set1_ps(x_scale)), _mm256_cvtepi32_ps(sums));
  if constexpr (Affine) term = _mm256_add_ps(term, _mm256_mul_ps(mins, _mm256_set1_ps(x_scaled_sum)));
  return _mm256_add_ps(acc, term);
}

}  // namespace kipp::kernels::cpu
