// Horizontal sums shared by the AVX-512 kernels. Included only by files compiled with AVX-512
// enabled for the functions that call these.
#pragma once

#include <immintrin.h>

namespace kipp::kernels::avx512 {

#define KIPP_AVX512_BASE __attribute__((target("avx512f,avx512dq")))

KIPP_AVX512_BASE inline __m512 add_pairs(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
}
KIPP_AVX512_BASE inline __m512 add_quads(__m512 ab, __m512 cd) {
  const __m512d x = _mm512_castps_pd(ab), y = _mm512_castps_pd(cd);
  return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
}
KIPP_AVX512_BASE inline __m512 add_halves(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Lane j = the sum of the lanes of v[j], for 16 accumulators at once (a transposing tree).
// Every accumulator is summed by the same tree whichever slot it occupies, so a result does
// not depend on what else shares the call.
KIPP_AVX512_BASE inline __m512 reduce16(const __m512 (&v)[16]) {
  const __m512 q0 = add_quads(add_pairs(v[0], v[1]), add_pairs(v[2], v[3]));
  const __m512 q1 = add_quads(add_pairs(v[4], v[5]), add_pairs(v[6], v[7]));
  const __m512 q2 = add_quads(add_pairs(v[8], v[9]), add_pairs(v[10], v[11]));
  const __m512 q3 = add_quads(add_pairs(v[12], v[13]), add_pairs(v[14], v[15]));
  return add_halves(add_halves(q0, q1), add_halves(q2, q3));
}

#undef KIPP_AVX512_BASE

}  // namespace kipp::kernels::avx512
