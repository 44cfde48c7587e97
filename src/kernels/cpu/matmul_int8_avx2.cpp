#include "kernels/cpu/matmul_int8_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "format/quant.h"
#include "kernels/cpu/matmul_avx2.h"

#define KIPP_INT8_TARGET KIPP_AVX2
#include "kernels/cpu/matmul_int8_avx2_panels.h"

namespace kipp::kernels::avx2 {
namespace {

// Outputs per tile: one lane each in the vector of block sums.
constexpr int kOutputs = 8;
// Input rows per tile, sharing each block's loaded and prepared weights.
constexpr int kMaxRows = 4;

template <bool Affine>
struct Format {
  using Block = std::conditional_t<Affine, BlockAffine4, BlockQ8_0>;
};

// A tile's weights for one 32-column block, ready for VPMADDUBSW: Q8_0 as the codes (whose signs
// go onto the input) and their magnitudes (unsigned; a stored -128 becomes 128, still exact),
// affine4 as the 32 unsigned codes in input order; plus the 8 outputs' scales (and minimums).
struct BlockWeights {
  __m256i codes[kOutputs];
  __m256i magnitudes[kOutputs];
  __m256 scales, mins;
};

// The 8 F16 values at byte `offset` of the 8 blocks, as FP32.
KIPP_AVX2 inline __m256 halves(const uint8_t* const (&blocks)[kOutputs], size_t offset) {
  const auto at = [&](int c) {
    uint16_t bits;
    std::memcpy(&bits, blocks[c] + offset, sizeof bits);
    return static_cast<short>(bits);
  };
  return _mm256_cvtph_ps(_mm_setr_epi16(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7)));
}

template <bool Affine>
KIPP_AVX2 inline void load_block(const uint8_t* const (&rows)[kOutputs], size_t at, BlockWeights& bw) {
  using Block = typename Format<Affine>::Block;
  const uint8_t* blocks[kOutputs];
#pragma GCC unroll 8
  for (int c = 0; c < kOutputs; ++c) {
    blocks[c] = rows[c] + at;
    const auto* block = reinterpret_cast<const Block*>(blocks[c]);
    if constexpr (Affine) {
      // Byte i holds code i (low nibble) and code i + 16 (high nibble).
      const __m128i nibbles = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block->nibbles));
      bw.codes[c] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(nibbles, 4), nibbles), _mm256_set1_epi8(0x0F));
    } else {
      bw.codes[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block->q));
      bw.magnitudes[c] = _mm256_abs_epi8(bw.codes[c]);
    }
  }
  bw.scales = halves(blocks, offsetof(Block, scale_f16));
  if constexpr (Affine) bw.mins = halves(blocks, offsetof(BlockAffine4, min_f16));
}

// The 8 vectors' sums of 32-bit lanes, vector c's in lane c.
KIPP_AVX2 inline __m256i lane_sums(const __m256i (&p)[kOutputs]) {
  const __m256i quads = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i more = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(quads, more, 0x20), _mm256_permute2x128_si256(quads, more, 0x31));
}

// The exact integer dot of one input block with each of the tile's 8 weight blocks.
template <bool Affine>
KIPP_AVX2 inline __m256i block_sums(const BlockWeights& bw, const int8_t* x_codes) {
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x_codes));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i p[kOutputs];
#pragma GCC unroll 8
  for (int c = 0; c < kOutputs; ++c) {
    // Pairs of products stay within int16: |w| <= 128 (Q8_0) or 15 (affine4), |x| <= 127.
    const __m256i pairs = Affine ? _mm256_maddubs_epi16(bw.codes[c], x)
                                 : _mm256_maddubs_epi16(bw.magnitudes[c], _mm256_sign_epi8(x, bw.codes[c]));
    p[c] = _mm256_madd_epi16(pairs, ones);
  }
  return lane_sums(p);
}

// The next tile's weight rows, fetched ahead into L2 a block's share at a time: each row is a
// short stream the hardware prefetchers barely lock on to before it ends.
struct FetchAhead {
  const uint8_t* begin = nullptr;  // null: none
  const uint8_t* end = nullptr;
};

// Rows [row, row + R) of `in` times the 8 weight rows `rows` (those past `outputs` are read but
// not stored), into out for (row, first output).
template <bool Affine, int R>
KIPP_AVX2 void tile(const uint8_t* const (&rows)[kOutputs], size_t outputs, const PreparedInput& in, size_t row,
                    FetchAhead next, float* out, size_t out_stride) {
  const size_t blocks = in.cols / 32;
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  BlockWeights bw;
  const size_t share = kOutputs * sizeof(typename Format<Affine>::Block);
  for (size_t b = 0; b < blocks; ++b) {
    if (next.begin != nullptr)
      for (const uint8_t* line = next.begin + b * share; line < next.begin + (b + 1) * share && line < next.end;
           line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
    load_block<Affine>(rows, b * sizeof(typename Format<Affine>::Block), bw);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const size_t x_block = (row + r) * blocks + b;
      const __m256i sums = block_sums<Affine>(bw, in.q8 + x_block * 32);
      // The reference's float step, in its order (ref/q8_rows.h); this file is compiled without
      // contraction into FMA.
      __m256 term =
          _mm256_mul_ps(_mm256_mul_ps(bw.scales, _mm256_set1_ps(in.q8_scale[x_block])), _mm256_cvtepi32_ps(sums));
      if constexpr (Affine)
        term = _mm256_add_ps(term, _mm256_mul_ps(bw.mins, _mm256_set1_ps(in.q8_scaled_sum[x_block])));
      acc[r] = _mm256_add_ps(acc[r], term);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* dst = out + r * out_stride;
    if (outputs == kOutputs) {
      _mm256_storeu_ps(dst, acc[r]);
    } else {
      alignas(32) float lanes[kOutputs];
      _mm256_store_ps(lanes, acc[r]);
      std::memcpy(dst, lanes, outputs * sizeof(float));
    }
  }
}

template <bool Affine>
void stored_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  for (size_t first = 0; first < w.rows; first += kOutputs) {
    const size_t outputs = std::min<size_t>(kOutputs, w.rows - first);
    const uint8_t* rows[kOutputs];
    // Lanes past the matrix's last row repeat its first row of the tile.
    for (size_t c = 0; c < kOutputs; ++c) rows[c] = w.data + (first + (c < outputs ? c : 0)) * w.row_bytes;
    const FetchAhead ahead{w.data + (first + kOutputs) * w.row_bytes,
                           w.data + std::min(w.rows, first + 2 * kOutputs) * w.row_bytes};
    for (size_t row = 0; row < in.rows; row += kMaxRows) {
      float* dst = out + row * out_stride + first;
      // The first and last row tiles fetch ahead (the weights stay in cache for those between).
      const FetchAhead next =
          first + kOutputs < w.rows && (row == 0 || row + kMaxRows >= in.rows) ? ahead : FetchAhead{};
      switch (std::min<size_t>(kMaxRows, in.rows - row)) {
        case 1: tile<Affine, 1>(rows, outputs, in, row, next, dst, out_stride); break;
        case 2: tile<Affine, 2>(rows, outputs, in, row, next, dst, out_stride); break;
        case 3: tile<Affine, 3>(rows, outputs, in, row, next, dst, out_stride); break;
        default: tile<Affine, 4>(rows, outputs, in, row, next, dst, out_stride); break;
      }
    }
  }
}

}  // namespace

void quantized_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  const bool affine = w.type == GgmlType::Q4_1;
  if (w.panels)
    return affine ? panels_matmul<false, true>(w, in, out, out_stride)
                  : panels_matmul<false, false>(w, in, out, out_stride);
  return affine ? stored_matmul<true>(w, in, out, out_stride) : stored_matmul<false>(w, in, out, out_stride);
}

bool packs_quantized(const WeightMatrix& w) { return cpu::stores_panels(w); }

bool pack_quantized(const WeightMatrix& w, uint8_t* out) {
  if (!cpu::stores_panels(w)) return false;
  cpu::pack_quantized_panels(w, out);
  return true;
}

}  // namespace kipp::kernels::avx2
