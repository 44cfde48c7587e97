#include "kernels/cpu/matmul_bf16_panels_avx2.h"

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

#include "kernels/cpu/bf16_panel_walk.h"
#include "kernels/cpu/bf16_panels.h"
#include "kernels/cpu/matmul_avx2.h"

namespace kipp::kernels::avx2 {
namespace {

// Blocks (1 KiB per panel) a streaming tile fetches ahead of the one it multiplies, so memory
// keeps streaming while the tile computes (`kipp bench` decode and batch show the choice).
constexpr size_t kRowAheadBlocks = 4;
constexpr size_t kRowsAheadBlocks = 8;
// Panels per pass over prefill's rows: 4 x 16 rows x up to 3072 columns of weights (384 KiB)
// stay in a 512 KiB L2, the smallest of the CPUs this table is for.
constexpr size_t kPanelsPerPass = 4;
// 16 vector registers: a tile of R rows x P panels holds 2 x R x P accumulators, each row's two
// broadcast inputs and the two FP32 vectors of the weight half being multiplied. Tiles of 2 rows
// past 2 panels (8 accumulators, 4 broadcasts) serve batches and prefill alike: bench/kernel_bench
// on weights in cache finds them faster than 3 x 1 or 4 x 1 (whose 8 broadcasts spill).
constexpr int kMaxStreamingRows = 2;
constexpr int kMaxPrefillRows = 2;
constexpr size_t kMaxPanelByPanelRows = 64;

// R input rows of block-major FP32 `x` times P panels (Bf16PanelTileFn's contract). With
// Ahead > 0, the lines Ahead blocks further on in each panel are fetched as the tile goes; with
// kFetchNextPanel, the same lines of the panel after.
template <int R, int P, size_t Ahead>
KIPP_AVX2 void panel_tile(const uint8_t* panel, size_t panel_bytes, size_t blocks, const float* x, size_t block_stride,
                          float* out, size_t out_stride) {
  __m256 acc[R][2 * P];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int h = 0; h < 2 * P; ++h) acc[r][h] = _mm256_setzero_ps();
  const __m256i high_half = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* tile = panel + b * kBf16TileBytes;
    const float* xb = x + b * block_stride;
#pragma GCC unroll 2
    for (size_t line = 0; line < kBf16BlockColumns / 2; ++line) {
      __m256 even_x[R], odd_x[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        even_x[r] = _mm256_broadcast_ss(xb + r * kBf16BlockColumns + 2 * line);
        odd_x[r] = _mm256_broadcast_ss(xb + r * kBf16BlockColumns + 2 * line + 1);
      }
#pragma GCC unroll 8
      for (int h = 0; h < 2 * P; ++h) {
        const uint8_t* at = tile + (h / 2) * panel_bytes + line * 64 + (h % 2) * 32;
        if (h % 2 == 0) {
          if constexpr (Ahead == kFetchNextPanel)
            fetch_to_l2(at, P * panel_bytes);
          else if constexpr (Ahead > 0)
            fetch_to_l2(at, Ahead * kBf16TileBytes);
        }
        // Lane n holds output n's pair: its even column in the low 16 bits, the odd in the high.
        const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
        const __m256 even_w = _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
        const __m256 odd_w = _mm256_castsi256_ps(_mm256_and_si256(pairs, high_half));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          acc[r][h] = _mm256_fmadd_ps(even_w, even_x[r], acc[r][h]);
          acc[r][h] = _mm256_fmadd_ps(odd_w, odd_x[r], acc[r][h]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int h = 0; h < 2 * P; ++h) _mm256_storeu_ps(out + r * out_stride + h * 8, acc[r][h]);
}

using TileFn = Bf16PanelTileFn<float>;

template <int P, size_t Ahead, size_t... R>
constexpr std::array<TileFn, sizeof...(R)> tiles(std::index_sequence<R...>) {
  return {&panel_tile<static_cast<int>(R) + 1, P, Ahead>...};
}

// Tiles of 1 to N rows times P panels.
template <int P, size_t Ahead, int N>
constexpr std::array<TileFn, N> kTiles = tiles<P, Ahead>(std::make_index_sequence<N>());

// One row: 4 panels side by side (8 accumulator chains, enough to hide the FMA latency). More
// rows: tiles of 2 rows past 2 panels, streaming (2 rows), panel group by panel group (up to 64
// rows) or in passes over 4 panels (prefill).
constexpr Bf16PanelTiles<float> kPanelTiles{
    kMaxStreamingRows,
    kMaxStreamingRows,
    kMaxPanelByPanelRows,
    kMaxPrefillRows,
    kPanelsPerPass,
    {kTiles<4, kRowAheadBlocks, 1>.data(), kTiles<1, kRowAheadBlocks, 1>.data(), 4},
    {kTiles<2, kRowsAheadBlocks, 2>.data(), kTiles<1, kRowsAheadBlocks, 2>.data(), 2},
    {kTiles<2, kRowsAheadBlocks, 2>.data(), kTiles<1, kRowsAheadBlocks, 2>.data(), 2},
    {kTiles<2, kFetchNextPanel, 2>.data(), kTiles<1, kFetchNextPanel, 2>.data(), 2},
    {kTiles<2, 0, kMaxPrefillRows>.data(), kTiles<1, 0, kMaxPrefillRows>.data(), 2}};

}  // namespace

void bf16_panels_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  walk_bf16_panels(w, in, kPanelTiles, out, out_stride);
}

}  // namespace kipp::kernels::avx2
