// Products of packed Q8_0 and affine4 panels (quant_panels.h) on 256-bit registers: one template
// for AVX2 (VPMADDUBSW) and AVX-VNNI (VPDPBUSD), compiled by two files for their own targets.
// The file that includes it defines KIPP_INT8_TARGET (the target attribute) first and
// instantiates panels_matmul with Vnni matching it; everything here has internal linkage, so the
// two copies never meet.
//
// A 64-byte vector of a panel is two halves of 8 outputs, one 32-bit lane per output: each
// block's integer sum lands whole in its lane (no horizontal sums), and the float step follows
// the reference's order (ref/q8_rows.h), so every result is the reference's bit for bit. Decoding
// reads both halves of a panel in one pass, a single sequential stream of weights; prefill tiles
// take one half at a time past several input rows, the panel then staying in cache for the next
// tiles.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cpu/quant_block_step.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/matmul_input.h"
#include "kernels/weights.h"

#ifndef KIPP_INT8_TARGET
#error "define KIPP_INT8_TARGET before including matmul_int8_avx2_panels.h"
#endif

namespace kipp::kernels::avx2 {
namespace {

using cpu::kPanelRows;
using cpu::stored_panel_block;

constexpr size_t kHalfRows = 8;
// How far ahead decoding fetches its stream, into L2: what counts is the distance in bytes, a
// few KiB, hence more of the smaller affine4 blocks (bench/kernel_bench).
constexpr size_t fetch_ahead_blocks(bool affine) { return affine ? 16 : 8; }

// Input rows a tile takes with both halves of a panel (decoding) and with one (prefill): the
// integer and float accumulators of every row and half, the weight vectors (AVX2 also their
// magnitudes) and the broadcast input are sized to the 16 vector registers.
constexpr int stream_rows(bool vnni) { return vnni ? 3 : 2; }
constexpr int prefill_rows(bool vnni) { return vnni ? 6 : 5; }

// The 4 input codes at x in every 32-bit lane.
KIPP_INT8_TARGET inline __m256i broadcast4(const int8_t* x) {
  int32_t v;
  std::memcpy(&v, x, 4);
  return _mm256_set1_epi32(v);
}

// Input rows [row, row + R) times halves [half, half + H) of the panel whose block 0 is at
// `panel`, into out (row r at out + r * out_stride, half h's 8 outputs at 8 * h). When `fetch` is
// set, each block fetches the block as far on from it into L2.
template <bool Vnni, bool Affine, int R, int H>
KIPP_INT8_TARGET void panel_rows(const uint8_t* panel, size_t half, const PreparedInput& in, size_t row,
                                 ptrdiff_t fetch, float* out, size_t out_stride) {
  constexpr cpu::StoredPanelBlock kBlock = stored_panel_block(Affine);
  const size_t blocks = in.cols / 32;
  const int8_t* x_rows = in.q8 + row * in.cols;
  __m256 acc[R][H];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) acc[r][h] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* block = panel + b * kBlock.bytes;
    if (fetch != 0)
#pragma GCC unroll 9
      for (size_t line = 0; line < kBlock.bytes; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(block + fetch + line), _MM_HINT_T1);
    // Group g's codes of half h.
    const uint8_t* codes = block + kBlock.codes_offset + 32 * half;
    const auto x_at = [&](int r, int offset) { return x_rows + r * in.cols + b * 32 + offset; };
    __m256i sums[R][H];
    if constexpr (Affine) {
      // Affine4 codes are 0..15: a pair of products is at most 3810 in magnitude, so the 4 groups'
      // low and high pairs add up in 16 bits without saturating (AVX2) before one widening.
      __m256i pairs[R][H];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) sums[r][h] = pairs[r][h] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        __m256i low[H], high[H];
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) {
          const __m256i nibbles = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 64 * g + 32 * h));
          low[h] = _mm256_and_si256(nibbles, low_nibbles);
          high[h] = _mm256_and_si256(_mm256_srli_epi16(nibbles, 4), low_nibbles);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256i x_low = broadcast4(x_at(r, 4 * g)), x_high = broadcast4(x_at(r, 16 + 4 * g));
#pragma GCC unroll 2
          for (int h = 0; h < H; ++h) {
            if constexpr (Vnni) {
              sums[r][h] = _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(sums[r][h], low[h], x_low), high[h], x_high);
            } else {
              pairs[r][h] = _mm256_add_epi16(pairs[r][h], _mm256_add_epi16(_mm256_maddubs_epi16(low[h], x_low),
                                                                           _mm256_maddubs_epi16(high[h], x_high)));
            }
          }
        }
      }
      if constexpr (!Vnni)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
          for (int h = 0; h < H; ++h) sums[r][h] = _mm256_madd_epi16(pairs[r][h], ones);
    } else {
      // Q8_0 codes carry +128. VPDPBUSD multiplies them as they are, starting at -128 x (input
      // code sum) to take it off again; VPMADDUBSW would saturate on them, so AVX2 takes the
      // signed codes back and multiplies their magnitudes (at most 128) by the input with their
      // signs applied: a pair of products stays within 16 bits.
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int32_t start = Vnni ? -128 * in.q8_sum[(row + r) * blocks + b] : 0;
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) sums[r][h] = _mm256_set1_epi32(start);
      }
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        __m256i w[H], magnitudes[H];
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) {
          w[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 64 * g + 32 * h));
          if constexpr (!Vnni) {
            w[h] = _mm256_xor_si256(w[h], _mm256_set1_epi8(static_cast<char>(0x80)));
            magnitudes[h] = _mm256_abs_epi8(w[h]);
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256i x = broadcast4(x_at(r, 4 * g));
#pragma GCC unroll 2
          for (int h = 0; h < H; ++h) {
            if constexpr (Vnni) {
              sums[r][h] = _mm256_dpbusd_avx_epi32(sums[r][h], w[h], x);
            } else {
              const __m256i pairs = _mm256_maddubs_epi16(magnitudes[h], _mm256_sign_epi8(x, w[h]));
              sums[r][h] = _mm256_add_epi32(sums[r][h], _mm256_madd_epi16(pairs, ones));
            }
          }
        }
      }
    }
    __m256 scales[H], mins[H];
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) {
      const size_t at = 2 * kHalfRows * (half + h);
      scales[h] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + at)));
      mins[h] = Affine ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 32 + at)))
                       : _mm256_setzero_ps();
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const size_t x_block = (row + r) * blocks + b;
      const float x_scaled_sum = Affine ? in.q8_scaled_sum[x_block] : 0.0f;
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h)
        acc[r][h] =
            cpu::add_block<Affine>(acc[r][h], scales[h], mins[h], sums[r][h], in.q8_scale[x_block], x_scaled_sum);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) _mm256_storeu_ps(out + r * out_stride + kHalfRows * h, acc[r][h]);
}

template <bool Vnni, bool Affine, int H>
struct PanelRowsTable {
  using Fn = void (*)(const uint8_t*, size_t, const PreparedInput&, size_t, ptrdiff_t, float*, size_t);
  template <size_t... R>
  static constexpr std::array<Fn, sizeof...(R)> make(std::index_sequence<R...>) {
    return {&panel_rows<Vnni, Affine, static_cast<int>(R) + 1, H>...};
  }
  static constexpr auto fns =
      make(std::make_index_sequence<static_cast<size_t>(H == 2 ? stream_rows(Vnni) : prefill_rows(Vnni))>());
};

// ref::matmul's contract for a matrix of whole packed panels (w.panels).
template <bool Vnni, bool Affine>
void panels_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  const size_t panel_bytes = kPanelRows * w.row_bytes, panels = w.rows / kPanelRows;
  if (in.rows == 0) return;
  if (in.rows <= static_cast<size_t>(stream_rows(Vnni))) {
    // Every panel read once, from memory, as one sequential stream fetched ahead of its use.
    const auto fn = PanelRowsTable<Vnni, Affine, 2>::fns[in.rows - 1];
    const ptrdiff_t ahead = static_cast<ptrdiff_t>(fetch_ahead_blocks(Affine) * stored_panel_block(Affine).bytes);
    for (size_t p = 0; p < panels; ++p) fn(w.data + p * panel_bytes, 0, in, 0, ahead, out + p * kPanelRows, out_stride);
    return;
  }
  // Tiles as even as they can be: as few as fit, of sizes differing by at most one.
  const size_t most = static_cast<size_t>(prefill_rows(Vnni)), tiles = (in.rows + most - 1) / most;
  for (size_t p = 0; p < panels; ++p) {
    const uint8_t* panel = w.data + p * panel_bytes;
    for (size_t half = 0; half < 2; ++half)
      for (size_t t = 0, row = 0; t < tiles; ++t) {
        const size_t end = in.rows * (t + 1) / tiles;
        // The first tile fetches the next panel line for line, so memory keeps streaming while
        // the tiles after it compute from cache.
        const ptrdiff_t fetch = half == 0 && t == 0 && p + 1 < panels ? static_cast<ptrdiff_t>(panel_bytes) : 0;
        PanelRowsTable<Vnni, Affine, 1>::fns[end - row - 1](
            panel, half, in, row, fetch, out + row * out_stride + p * kPanelRows + half * kHalfRows, out_stride);
        row = end;
      }
  }
}

}  // namespace
}  // namespace kipp::kernels::avx2
