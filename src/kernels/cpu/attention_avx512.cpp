#include "kernels/cpu/attention_avx512.h"

// GCC 12 reports its own intrinsics' intentionally undefined lanes as uninitialized once
// inlined; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning group; clang warns about the unknown name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kernels/cpu/avx512_sum.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/portable_ops.h"

#define KIPP_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

namespace kipp::kernels::avx512 {
namespace {

constexpr size_t kBlock = kKvBlockPositions;  // 32 keys: two vectors of scores

// e^x to about 1 ulp for x <= 0 (Cephes' expf polynomial, as the trainer's fast_exp); below
// -87.3 it is 0.
KIPP_AVX512 inline __m512 exp_nonpositive(__m512 x) {
  const __m512 clamped = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(clamped, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r =
      _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), clamped));
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

// Vector order: a K or V row, and a query and its output while in flight, hold each 32
// elements as two vectors, their 16 even elements then their 16 odd ones. Then one 64-byte
// load of BF16 widens to FP32 with one shift (even) or one mask (odd) per 16 elements, where
// in order it takes a 16-lane zero extension and a shift. Queries are put in that order once
// per tile and outputs back in order at the end.
KIPP_AVX512 inline __m512 widen_bf16(const uint16_t* pair, size_t vector) {
  const __m512i bits = _mm512_loadu_si512(pair + (vector / 2) * 32);
  return _mm512_castsi512_ps(vector % 2 == 0
                                 ? _mm512_slli_epi32(bits, 16)
                                 : _mm512_and_si512(bits, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// The query at `natural` (Chunks * 16 floats in order) in the vector order above.
template <size_t Chunks>
KIPP_AVX512 inline void deinterleave(const float* natural, float* split) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (size_t c = 0; c < Chunks; c += 2) {
    const __m512 low = _mm512_loadu_ps(natural + c * 16), high = _mm512_loadu_ps(natural + c * 16 + 16);
    _mm512_storeu_ps(split + c * 16, _mm512_permutex2var_ps(low, even, high));
    _mm512_storeu_ps(split + c * 16 + 16, _mm512_permutex2var_ps(low, odd, high));
  }
}

// An output from the vector order back into element order, in place.
template <size_t Chunks>
KIPP_AVX512 inline void interleave(float* values, __m512 scale) {
  const __m512i low = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i high = _mm512_add_epi32(low, _mm512_set1_epi32(8));
  for (size_t c = 0; c < Chunks; c += 2) {
    const __m512 even = _mm512_mul_ps(_mm512_loadu_ps(values + c * 16), scale);
    const __m512 odd = _mm512_mul_ps(_mm512_loadu_ps(values + c * 16 + 16), scale);
    _mm512_storeu_ps(values + c * 16, _mm512_permutex2var_ps(even, low, odd));
    _mm512_storeu_ps(values + c * 16 + 16, _mm512_permutex2var_ps(even, high, odd));
  }
}

// One K/V block's keys or values as FP32 vectors: key (or value) t, vector c (16 elements).
// Widened: converted once into scratch, for tiles of many queries. Stored: converted as read,
// for tiles of a few queries, where converting the whole block into scratch would cost as much
// as the products. Both give the same FP32 values, so a query's result is the same bits in
// either.
struct WidenedBlock {
  const float* data;
  size_t head_dim;
  // In a register: GCC otherwise folds the load into every product that uses the vector, and a
  // load per product, not the products, then bounds the loops (a core issues fewer 64-byte
  // loads than multiply-adds per cycle).
  KIPP_AVX512 __m512 load(size_t t, size_t c) const {
    __m512 v = _mm512_loadu_ps(data + t * head_dim + c * 16);
    asm("" : "+v"(v));
    return v;
  }
};
struct StoredBlock {
  const uint16_t* data;
  size_t position_stride;
  size_t count;  // positions present; the rest read as zero
  KIPP_AVX512 __m512 load(size_t t, size_t c) const {
    return t < count ? widen_bf16(data + t * position_stride, c) : _mm512_setzero_ps();
  }
};

// Fetches the rows of one kv head at positions [0, count) of a block's K or V into L2: into L1
// (T0) the requests would hold L1's few miss buffers and throttle a batch's reading of K/V
// (bench/attention_bench with 8 or 16 sequences shows it).
template <size_t Chunks>
KIPP_AVX512 __attribute__((always_inline)) inline void fetch_rows(const uint16_t* first, size_t position_stride,
                                                                  size_t count) {
  for (size_t t = 0; t < count; ++t)
    for (size_t line = 0; line < Chunks * 16 * sizeof(uint16_t); line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(first + t * position_stride) + line, _MM_HINT_T1);
}

// A block's values and the next block's keys, requested 8 positions of each at a time.
struct FetchAhead {
  const uint16_t* values;
  size_t value_count;
  const uint16_t* next_keys;  // null after the last block
  size_t next_count;
  size_t position_stride;
  template <size_t Chunks>
  KIPP_AVX512 __attribute__((always_inline)) void group(size_t first) const {
    if (first < value_count)
      fetch_rows<Chunks>(values + first * position_stride, position_stride, std::min<size_t>(8, value_count - first));
    if (first < next_count)
      fetch_rows<Chunks>(next_keys + first * position_stride, position_stride, std::min<size_t>(8, next_count - first));
  }
};

// Scores of one query (Chunks vectors) against keys first..first + 15.
template <size_t Chunks, typename Block>
KIPP_AVX512 inline __m512 scores16(const __m512 (&query)[Chunks], const Block& keys, size_t first) {
  __m512 partial[16];
#pragma GCC unroll 16
  for (size_t j = 0; j < 16; ++j) partial[j] = _mm512_mul_ps(query[0], keys.load(first + j, 0));
    // Vector by vector across the 16 keys, so 16 independent sums are in flight.
#pragma GCC unroll 16
  for (size_t c = 1; c < Chunks; ++c)
#pragma GCC unroll 16
    for (size_t j = 0; j < 16; ++j) partial[j] = _mm512_fmadd_ps(query[c], keys.load(first + j, c), partial[j]);
  return reduce16(partial);
}

// Scores of two queries against keys first..first + 7, each key read once for both: lanes
// 0-7 the first query's, 8-15 the second's. Each score is the same sequence as scores16's.
template <size_t Chunks, typename Block>
KIPP_AVX512 inline __m512 scores8x2(const float* first_query, const float* second_query, const Block& keys,
                                    size_t first) {
  __m512 partial[16];
#pragma GCC unroll 8
  for (size_t j = 0; j < 8; ++j) {
    const __m512 key = keys.load(first + j, 0);
    partial[j] = _mm512_mul_ps(_mm512_loadu_ps(first_query), key);
    partial[8 + j] = _mm512_mul_ps(_mm512_loadu_ps(second_query), key);
  }
#pragma GCC unroll 16
  for (size_t c = 1; c < Chunks; ++c)
#pragma GCC unroll 8
    for (size_t j = 0; j < 8; ++j) {
      const __m512 key = keys.load(first + j, c);
      partial[j] = _mm512_fmadd_ps(_mm512_loadu_ps(first_query + c * 16), key, partial[j]);
      partial[8 + j] = _mm512_fmadd_ps(_mm512_loadu_ps(second_query + c * 16), key, partial[8 + j]);
    }
  return reduce16(partial);
}

// results[q] (Chunks vectors each) = results[q] * keep[q] + sum over t < visible of
// weights[q][t] * value t, for Q queries sharing each value load; every element is the same
// sequence of FMAs whatever Q is.
template <size_t Chunks, size_t Q, typename Block>
KIPP_AVX512 inline void add_weighted_values(const Block& values, size_t visible, float* const (&results)[Q],
                                            const float* const (&weights)[Q], const float (&keep)[Q]) {
  constexpr size_t kWindow = std::min<size_t>(Chunks, 16 / Q);  // accumulators in registers
  for (size_t c0 = 0; c0 < Chunks; c0 += kWindow) {
    __m512 acc[Q][kWindow];
#pragma GCC unroll 2
    for (size_t q = 0; q < Q; ++q)
#pragma GCC unroll 16
      for (size_t c = 0; c < kWindow; ++c)
        acc[q][c] = _mm512_mul_ps(_mm512_loadu_ps(results[q] + (c0 + c) * 16), _mm512_set1_ps(keep[q]));
    for (size_t t = 0; t < visible; ++t) {
      __m512 weight[Q];
#pragma GCC unroll 2
      for (size_t q = 0; q < Q; ++q) weight[q] = _mm512_set1_ps(weights[q][t]);
#pragma GCC unroll 16
      for (size_t c = 0; c < kWindow; ++c) {
        const __m512 value = values.load(t, c0 + c);
#pragma GCC unroll 2
        for (size_t q = 0; q < Q; ++q) acc[q][c] = _mm512_fmadd_ps(weight[q], value, acc[q][c]);
      }
    }
#pragma GCC unroll 2
    for (size_t q = 0; q < Q; ++q)
#pragma GCC unroll 16
      for (size_t c = 0; c < kWindow; ++c) _mm512_storeu_ps(results[q] + (c0 + c) * 16, acc[q][c]);
  }
}

// The steps of attention_tile below are always inlined into it: each is one pass of the tile's
// loop, and inlined they compile to the instructions the loop would have in one body.
#define KIPP_AVX512_STEP KIPP_AVX512 __attribute__((always_inline)) inline

// A tile's queries (rows x group: query i = row * group + h) and its scratch, carved from one
// buffer: the K/V block widened, and per query its running softmax state, the block's scores
// and its values in the vector order.
template <size_t Chunks>
struct Tile {
  static constexpr size_t kHeadDim = Chunks * 16;
  size_t rows, group;
  float* out;
  size_t out_stride;
  float* keys;           // kBlock x head_dim, widened
  float* values;         // kBlock x head_dim, widened
  float* state;          // per query: running max, running sum
  float* scores;         // per query: the block's scores, then weights
  float* keep;           // per query: the rescaling of what came before
  float* split_queries;  // per query: its values in the vector order

  Tile(size_t row_count, size_t group_size, float* output, size_t output_stride, float* scratch)
      : rows(row_count),
        group(group_size),
        out(output),
        out_stride(output_stride),
        keys(scratch),
        values(keys + kBlock * kHeadDim),
        state(values + kBlock * kHeadDim),
        scores(state + 2 * queries()),
        keep(scores + kBlock * queries()),
        split_queries(keep + queries()) {}
  size_t queries() const { return rows * group; }
  float* result_of(size_t i) const { return out + (i / group) * out_stride + (i % group) * kHeadDim; }
};

// The K/V block at position `base` with `count` positions present, as the tile's rows see it.
struct BlockSpan {
  size_t first_position, base, count;
  // Keys of this block that query row `row` sees (0 when the block is after it).
  size_t visible(size_t row) const {
    const size_t position = first_position + row;
    return position < base ? 0 : std::min(count, position + 1 - base);
  }
};

// Every query starts with no keys seen: max -inf, sum 0, result 0, and its values in vector order.
template <size_t Chunks>
KIPP_AVX512_STEP void start_tile(const Tile<Chunks>& tile, const float* q, size_t q_stride) {
  constexpr size_t kHeadDim = Tile<Chunks>::kHeadDim;
  const size_t group = tile.group;
  for (size_t i = 0; i < tile.queries(); ++i) {
    tile.state[2 * i] = -INFINITY;
    tile.state[2 * i + 1] = 0.0f;
    std::fill(tile.result_of(i), tile.result_of(i) + kHeadDim, 0.0f);
    deinterleave<Chunks>(q + (i / group) * q_stride + (i % group) * kHeadDim, tile.split_queries + i * kHeadDim);
  }
}

// The block's keys and values converted once into the tile's scratch.
template <size_t Chunks>
KIPP_AVX512_STEP void widen_block(const Tile<Chunks>& tile, const StoredBlock& keys, const StoredBlock& values) {
  constexpr size_t kHeadDim = Tile<Chunks>::kHeadDim;
  for (size_t t = 0; t < kBlock; ++t)
    for (size_t c = 0; c < Chunks; ++c) {
      _mm512_storeu_ps(tile.keys + t * kHeadDim + c * 16, keys.load(t, c));
      _mm512_storeu_ps(tile.values + t * kHeadDim + c * 16, values.load(t, c));
    }
}

// Pass 1: every query's scaled scores against the block's keys, -inf for the keys it does not
// see. The first query also requests the rows fetch_ahead names while it scores.
template <size_t Chunks, bool Widen, typename Block>
KIPP_AVX512_STEP void score_block(const Tile<Chunks>& tile, const BlockSpan& span, const Block& key_block,
                                  const FetchAhead& fetch_ahead, float scale) {
  constexpr size_t kHeadDim = Tile<Chunks>::kHeadDim;
  const size_t group = tile.group;
  const __m512 minus_infinity = _mm512_set1_ps(-INFINITY);
  const __m512 scale_v = _mm512_set1_ps(scale);
  for (size_t row = 0; row < tile.rows; ++row) {
    const size_t visible = span.visible(row);
    if (visible == 0) continue;
    const __mmask16 low = visible >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << visible) - 1);
    const __mmask16 high = visible <= 16 ? __mmask16(0) : static_cast<__mmask16>((1u << (visible - 16)) - 1);
    for (size_t h = 0; h < group; h += 2) {
      const size_t i = row * group + h;
      const bool paired = h + 1 < group;
      float* row_scores = tile.scores + i * kBlock;
      const float* query_values = tile.split_queries + i * kHeadDim;
      // Two queries of the row share each key (converted or loaded once) when it has them.
      if (paired) {
        float* next_scores = row_scores + kBlock;
        for (size_t first = 0; first < visible; first += 8) {
          if (!Widen && i == 0) fetch_ahead.group<Chunks>(first);
          const __m512 both = scores8x2<Chunks>(query_values, query_values + kHeadDim, key_block, first);
          _mm512_mask_storeu_ps(row_scores + first, 0x00FF, both);
          _mm512_mask_storeu_ps(next_scores + first - 8, 0xFF00, both);
        }
      } else {
        if (!Widen && i == 0)
          for (size_t first = 0; first < kBlock; first += 8) fetch_ahead.group<Chunks>(first);
        __m512 query[Chunks];
#pragma GCC unroll 16
        for (size_t c = 0; c < Chunks; ++c) query[c] = _mm512_loadu_ps(query_values + c * 16);
        _mm512_storeu_ps(row_scores, scores16(query, key_block, 0));
        if (visible > 16) _mm512_storeu_ps(row_scores + 16, scores16(query, key_block, 16));
      }
      for (size_t pair = 0; pair < (paired ? 2 : 1); ++pair) {
        float* pair_scores = row_scores + pair * kBlock;
        _mm512_storeu_ps(pair_scores, _mm512_mask_blend_ps(low, minus_infinity,
                                                           _mm512_mul_ps(_mm512_loadu_ps(pair_scores), scale_v)));
        _mm512_storeu_ps(
            pair_scores + 16,
            _mm512_mask_blend_ps(high, minus_infinity, _mm512_mul_ps(_mm512_loadu_ps(pair_scores + 16), scale_v)));
      }
    }
  }
}

// Pass 2, the online softmax: each query's running max and sum take in the block's scores, the
// scores become weights relative to the new max, and keep says how to rescale what came before.
template <size_t Chunks>
KIPP_AVX512_STEP void update_softmax(const Tile<Chunks>& tile, const BlockSpan& span) {
  const size_t group = tile.group;
  float* state = tile.state;
  for (size_t row = 0; row < tile.rows; ++row) {
    if (span.visible(row) == 0) continue;
    for (size_t i = row * group; i < (row + 1) * group; ++i) {
      float* row_scores = tile.scores + i * kBlock;
      const __m512 s0 = _mm512_loadu_ps(row_scores), s1 = _mm512_loadu_ps(row_scores + 16);
      const float new_max = std::max(state[2 * i], _mm512_reduce_max_ps(_mm512_max_ps(s0, s1)));
      tile.keep[i] = std::exp(state[2 * i] - new_max);
      const __m512 shift = _mm512_set1_ps(new_max);
      // exp(-inf) is 0: invisible keys get no weight.
      const __m512 p0 = exp_nonpositive(_mm512_sub_ps(s0, shift));
      const __m512 p1 = exp_nonpositive(_mm512_sub_ps(s1, shift));
      _mm512_storeu_ps(row_scores, p0);
      _mm512_storeu_ps(row_scores + 16, p1);
      state[2 * i + 1] = state[2 * i + 1] * tile.keep[i] + _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
      state[2 * i] = new_max;
    }
  }
}

// Pass 3: every query's result, rescaled by keep, plus the block's values by their weights.
template <size_t Chunks, typename Block>
KIPP_AVX512_STEP void add_block_values(const Tile<Chunks>& tile, const BlockSpan& span, const Block& value_block) {
  constexpr size_t kHeadDim = Tile<Chunks>::kHeadDim;
  const size_t group = tile.group;
  const float* scores = tile.scores;
  const float* keep = tile.keep;
  for (size_t row = 0; row < tile.rows; ++row) {
    const size_t visible = span.visible(row);
    if (visible == 0) continue;
    float* row_out = tile.out + row * tile.out_stride;
    for (size_t h = 0; h < group; h += 2) {
      const size_t i = row * group + h;
      // Two queries of a row share each value load.
      if (h + 1 < group) {
        float* const results[2] = {row_out + h * kHeadDim, row_out + (h + 1) * kHeadDim};
        const float* const weights[2] = {scores + i * kBlock, scores + (i + 1) * kBlock};
        const float kept[2] = {keep[i], keep[i + 1]};
        add_weighted_values<Chunks>(value_block, visible, results, weights, kept);
      } else {
        float* const results[1] = {row_out + h * kHeadDim};
        const float* const weights[1] = {scores + i * kBlock};
        const float kept[1] = {keep[i]};
        add_weighted_values<Chunks>(value_block, visible, results, weights, kept);
      }
    }
  }
}

template <size_t Chunks, bool Widen>
KIPP_AVX512 void attention_tile(const float* q, size_t q_stride, size_t rows, size_t first_position, size_t group,
                                const KvLayerView& kv, float scale, float* scratch, float* out, size_t out_stride) {
  constexpr size_t kHeadDim = Chunks * 16;
  const Tile<Chunks> tile(rows, group, out, out_stride, scratch);
  start_tile(tile, q, q_stride);
  const size_t last = first_position + rows - 1;
  if constexpr (!Widen) fetch_rows<Chunks>(kv.blocks[0] + kv.k_offset, kv.position_stride, std::min(kBlock, last + 1));
  for (size_t base = 0; base <= last; base += kBlock) {
    const size_t count = std::min(kBlock, last + 1 - base);
    const uint16_t* block = kv.blocks[base / kBlock];
    // A few queries' products do not hide the memory latency of rows read one after another:
    // this block's values and the next block's keys are requested while the keys are scored,
    // 8 positions of each per 8 keys scored (a lone query, scored 16 keys at a time, requests
    // them all before it starts). Spread so, the requests keep the line fill buffers
    // busy without stalling the scoring behind them, where all at the start of the block would
    // stall it (bench/attention_bench, 8 sequences x 512 positions).
    const size_t next_count = base + kBlock <= last ? std::min(kBlock, last + 1 - base - kBlock) : 0;
    const FetchAhead fetch_ahead{block + kv.v_offset, count,
                                 next_count > 0 ? kv.blocks[base / kBlock + 1] + kv.k_offset : nullptr, next_count,
                                 kv.position_stride};
    const StoredBlock stored_keys{block + kv.k_offset, kv.position_stride, count};
    const StoredBlock stored_values{block + kv.v_offset, kv.position_stride, count};
    if constexpr (Widen) widen_block(tile, stored_keys, stored_values);
    const auto key_block = [&] {
      if constexpr (Widen)
        return WidenedBlock{tile.keys, kHeadDim};
      else
        return stored_keys;
    }();
    const auto value_block = [&] {
      if constexpr (Widen)
        return WidenedBlock{tile.values, kHeadDim};
      else
        return stored_values;
    }();
    // Three passes over the tile's queries, each a loop of independent iterations the core
    // can overlap: the block's scores, the softmax update, the weighted sum of the values.
    // Queries are walked as (row, head h of the group), query i = row * group + h, so no query
    // index is divided by the group size.
    const BlockSpan span{first_position, base, count};
    score_block<Chunks, Widen>(tile, span, key_block, fetch_ahead, scale);
    update_softmax(tile, span);
    add_block_values(tile, span, value_block);
  }
  for (size_t i = 0; i < tile.queries(); ++i)
    interleave<Chunks>(tile.result_of(i), _mm512_set1_ps(1.0f / tile.state[2 * i + 1]));
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
    case 32: return run.template operator()<2>();
    case 64: return run.template operator()<4>();
    case 128: return run.template operator()<8>();
    case 256: return run.template operator()<16>();
    default:
      return portable::attention_rows(q, q_stride, rows, first_position, group, kv, scale, scratch, out, out_stride);
  }
}

}  // namespace kipp::kernels::avx512
