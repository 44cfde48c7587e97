#include "kernels/cpu/attention_avx512.h"

// GCC 12 reports its own intrinsics' intentionally undefined lanes as uninitialized once
// inlined; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/avx512_sum.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/portable_ops.h"

#define KIPP_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

namespace kipp::kernels::avx512 {
namespace {

constexpr size_t kBlock = kKvBlockPositions;  // 32 keys: two vectors of scores
constexpr size_t kMaxHeadDim = 256;

// e^x to about 1 ulp for x <= 0 (Cephes' expf polynomial, as the trainer's fast_exp); below
// -87.3 it is 0.
KIPP_AVX512 inline __m512 exp_nonpositive(__m512 x) {
  const __m512 clamped = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(clamped, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f),
                                   _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), clamped));
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  const __m512 result = _mm512_scalef_ps(p, n);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ), result, _mm512_setzero_ps());
}


KIPP_AVX512 inline __m512 widen_bf16(const uint16_t* p) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}

// One K/V block's keys or values as FP32 vectors: key (or value) t, chunk c (16 elements).
// Widened: converted once into scratch, for tiles of many queries. Stored: converted as read,
// for tiles of a few queries, where converting the whole block into scratch cost as much as
// the products (batched decoding spent 15% of a step there). Both give the same FP32 values,
// so a query's result is the same bits in either.
struct WidenedBlock {
  const float* data;
  size_t head_dim;
  KIPP_AVX512 __m512 load(size_t t, size_t c) const { return _mm512_loadu_ps(data + t * head_dim + c * 16); }
};
struct StoredBlock {
  const uint16_t* data;
  size_t position_stride;
  size_t count;  // positions present; the rest read as zero
  KIPP_AVX512 __m512 load(size_t t, size_t c) const {
    return t < count ? widen_bf16(data + t * position_stride + c * 16) : _mm512_setzero_ps();
  }
};

// Scores of one query (chunks = head_dim / 16 vectors) against keys first..first + 15.
template <size_t Chunks, typename Block>
KIPP_AVX512 inline __m512 scores16(const __m512 (&query)[Chunks], const Block& keys, size_t first) {
  __m512 partial[16];
#pragma GCC unroll 16
  for (size_t j = 0; j < 16; ++j) partial[j] = _mm512_mul_ps(query[0], keys.load(first + j, 0));
  // Chunk by chunk across the 16 keys, so 16 independent sums are in flight.
#pragma GCC unroll 16
  for (size_t c = 1; c < Chunks; ++c)
#pragma GCC unroll 16
    for (size_t j = 0; j < 16; ++j) partial[j] = _mm512_fmadd_ps(query[c], keys.load(first + j, c), partial[j]);
  return reduce16(partial);
}

template <size_t Chunks, bool Widen>
KIPP_AVX512 void attention_tile(const float* q, size_t q_stride, size_t rows, size_t first_position, size_t group,
                                const KvLayerView& kv, float scale, float* scratch, float* out, size_t out_stride) {
  constexpr size_t kHeadDim = Chunks * 16;
  float* keys = scratch;  // kBlock x head_dim, widened
  float* values = keys + kBlock * kHeadDim;
  const size_t queries = rows * group;
  float* state = values + kBlock * kHeadDim;  // per query: running max, running sum
  float* scores = state + 2 * queries;        // per query: the block's scores, then weights
  float* keep = scores + kBlock * queries;    // per query: the rescaling of what came before
  for (size_t i = 0; i < queries; ++i) {
    state[2 * i] = -INFINITY;
    state[2 * i + 1] = 0.0f;
    float* result = out + (i / group) * out_stride + (i % group) * kHeadDim;
    std::fill(result, result + kHeadDim, 0.0f);
  }
  const size_t last = first_position + rows - 1;
  for (size_t base = 0; base <= last; base += kBlock) {
    const size_t count = std::min(kBlock, last + 1 - base);
    const uint16_t* block = kv.blocks[base / kBlock];
    const StoredBlock stored_keys{block + kv.k_offset, kv.position_stride, count};
    const StoredBlock stored_values{block + kv.v_offset, kv.position_stride, count};
    if constexpr (Widen)
      for (size_t t = 0; t < kBlock; ++t)
        for (size_t c = 0; c < Chunks; ++c) {
          _mm512_storeu_ps(keys + t * kHeadDim + c * 16, stored_keys.load(t, c));
          _mm512_storeu_ps(values + t * kHeadDim + c * 16, stored_values.load(t, c));
        }
    const auto key_block = [&] {
      if constexpr (Widen) return WidenedBlock{keys, kHeadDim};
      else return stored_keys;
    }();
    const auto value_block = [&] {
      if constexpr (Widen) return WidenedBlock{values, kHeadDim};
      else return stored_values;
    }();
    // Three passes over the tile's queries, each a loop of independent iterations the core
    // can overlap: the block's scores, the softmax update, the weighted sum of the values.
    const __m512 minus_infinity = _mm512_set1_ps(-INFINITY);
    for (size_t i = 0; i < queries; ++i) {
      const size_t row = i / group, position = first_position + row;
      if (position < base) continue;
      const size_t visible = std::min(count, position + 1 - base);
      const float* query_values = q + row * q_stride + (i % group) * kHeadDim;
      __m512 query[Chunks];
#pragma GCC unroll 16
      for (size_t c = 0; c < Chunks; ++c) query[c] = _mm512_loadu_ps(query_values + c * 16);
      const __mmask16 low = visible >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << visible) - 1);
      const __mmask16 high = visible <= 16 ? __mmask16(0) : static_cast<__mmask16>((1u << (visible - 16)) - 1);
      float* row_scores = scores + i * kBlock;
      _mm512_storeu_ps(row_scores, _mm512_mask_blend_ps(low, minus_infinity,
                                                        _mm512_mul_ps(scores16(query, key_block, 0), _mm512_set1_ps(scale))));
      _mm512_storeu_ps(row_scores + 16,
                       high == 0 ? minus_infinity
                                 : _mm512_mask_blend_ps(high, minus_infinity,
                                                        _mm512_mul_ps(scores16(query, key_block, 16),
                                                                      _mm512_set1_ps(scale))));
    }
    for (size_t i = 0; i < queries; ++i) {
      if (first_position + i / group < base) continue;
      float* row_scores = scores + i * kBlock;
      const __m512 s0 = _mm512_loadu_ps(row_scores), s1 = _mm512_loadu_ps(row_scores + 16);
      const float new_max = std::max(state[2 * i], _mm512_reduce_max_ps(_mm512_max_ps(s0, s1)));
      keep[i] = std::exp(state[2 * i] - new_max);
      const __m512 shift = _mm512_set1_ps(new_max);
      // exp(-inf) is 0: invisible keys get no weight.
      const __m512 p0 = exp_nonpositive(_mm512_sub_ps(s0, shift));
      const __m512 p1 = exp_nonpositive(_mm512_sub_ps(s1, shift));
      _mm512_storeu_ps(row_scores, p0);
      _mm512_storeu_ps(row_scores + 16, p1);
      state[2 * i + 1] = state[2 * i + 1] * keep[i] + _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
      state[2 * i] = new_max;
    }
    for (size_t i = 0; i < queries; ++i) {
      const size_t row = i / group, position = first_position + row;
      if (position < base) continue;
      const size_t visible = std::min(count, position + 1 - base);
      const float* weights = scores + i * kBlock;
      float* result = out + row * out_stride + (i % group) * kHeadDim;
      __m512 acc[Chunks];
      const __m512 keep_v = _mm512_set1_ps(keep[i]);
#pragma GCC unroll 16
      for (size_t c = 0; c < Chunks; ++c) acc[c] = _mm512_mul_ps(_mm512_loadu_ps(result + c * 16), keep_v);
      for (size_t t = 0; t < visible; ++t) {
        const __m512 weight = _mm512_set1_ps(weights[t]);
#pragma GCC unroll 16
        for (size_t c = 0; c < Chunks; ++c)
          acc[c] = _mm512_fmadd_ps(weight, value_block.load(t, c), acc[c]);
      }
#pragma GCC unroll 16
      for (size_t c = 0; c < Chunks; ++c) _mm512_storeu_ps(result + c * 16, acc[c]);
    }
  }
  for (size_t i = 0; i < queries; ++i) {
    float* result = out + (i / group) * out_stride + (i % group) * kHeadDim;
    const __m512 inverse = _mm512_set1_ps(1.0f / state[2 * i + 1]);
    for (size_t c = 0; c < Chunks; ++c)
      _mm512_storeu_ps(result + c * 16, _mm512_mul_ps(_mm512_loadu_ps(result + c * 16), inverse));
  }
}

}  // namespace

void attention_rows(const float* q, size_t q_stride, size_t rows, size_t first_position, size_t group,
                    const KvLayerView& kv, float scale, float* scratch, float* out, size_t out_stride) {
  // Widening a block into scratch pays from 3 queries sharing it (its cost is about that of
  // converting as read for 2).
  const bool widen = rows * group > 2;
  const auto run = [&]<size_t Chunks>() {
    (widen ? attention_tile<Chunks, true> : attention_tile<Chunks, false>)(q, q_stride, rows, first_position, group, kv,
                                                                          scale, scratch, out, out_stride);
  };
  switch (kv.head_dim) {
    case 32:
      return run.template operator()<2>();
    case 64:
      return run.template operator()<4>();
    case 128:
      return run.template operator()<8>();
    case 256:
      return run.template operator()<16>();
    default:
      return portable::attention_rows(q, q_stride, rows, first_position, group, kv, scale, scratch, out, out_stride);
  }
}

}  // namespace kipp::kernels::avx512
