#include "kernels/cpu/matmul_bf16_panels_avx512.h"

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cpu/bf16_panel_walk.h"
#include "kernels/cpu/bf16_panels.h"

#define KIPP_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace kipp::kernels::avx512 {
namespace {

// Blocks (1 KiB per panel) a streaming tile fetches ahead of the one it multiplies, so memory
// keeps streaming while the tile computes. One row, reading 4 panels side by side, does best
// fewer blocks ahead than a batch on one panel (`kipp bench` decode and batch show the choice).
constexpr size_t kRowAheadBlocks = 4;
constexpr size_t kRowsAheadBlocks = 8;
// Panels per pass over prefill's rows: 8 x 16 rows x up to 3072 columns of weights (768 KiB)
// stay in the 1 MiB L2 while every row tile streams past them.
constexpr size_t kPanelsPerPass = 8;
// Up to 8 input rows (decoding, batched or not) go past every panel in one tile, so each weight
// line is read once: 8 rows x 2 accumulators, 2 weight lines and 2 broadcasts fill 20 of the 32
// vector registers. Over 64 rows (prefill) go in tiles of up to 6 past two panels: 6 x 2 x 2
// accumulators, 4 weight lines and 2 broadcasts fill 30.
constexpr int kMaxStreamingRows = 8;
constexpr int kMaxPrefillRows = 6;
// Up to 64 rows (batches of 9+ sequences, short prompts) go panel by panel, the panel's row
// tiles of up to 8 one after the other: the first reads the panel from memory, fetching ahead,
// and the rest find it in L2. Beyond 64 rows the prefill tiles, which fetch nothing ahead but
// broadcast each input pair for two panels, do as well or better (`kipp bench` prefill).
constexpr size_t kMaxPanelByPanelRows = 64;
// R input rows from x, block-major (BlockMajorInput: row r's block b at x + b * block_stride +
// 32 * r), times P panels from `panel` (`panel_bytes` apart), into out (row r at
// out + r * out_stride, panel p's 16 outputs from 16 * p). With Ahead > 0, the lines Ahead blocks
// further on in each panel are fetched as the tile goes; with kFetchNextPanel, the same lines of the
// panel after.
template <int R, int P, size_t Ahead>
KIPP_AVX512 void panel_tile(const uint8_t* panel, size_t panel_bytes, size_t blocks, const uint16_t* x,
                            size_t block_stride, float* out, size_t out_stride) {
  __m512 even[R][P], odd[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) even[r][p] = odd[r][p] = _mm512_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* tile = panel + b * kBf16TileBytes;
    const uint16_t* xb = x + b * block_stride;
#pragma GCC unroll 8
    for (size_t line = 0; line < kBf16BlockColumns / 2; line += 2) {
      __m512bh w0[P], w1[P];
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const uint8_t* at = tile + p * panel_bytes + line * 64;
        if constexpr (Ahead == kFetchNextPanel) {
          fetch_to_l2(at, P * panel_bytes);
          fetch_to_l2(at, P * panel_bytes + 64);
        } else if constexpr (Ahead > 0) {
          fetch_to_l2(at, Ahead * kBf16TileBytes);
          fetch_to_l2(at, Ahead * kBf16TileBytes + 64);
        }
        w0[p] = (__m512bh)_mm512_loadu_si512(at);
        w1[p] = (__m512bh)_mm512_loadu_si512(at + 64);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        // The pairs in registers, each broadcast once for all P panels: a broadcast inside each
        // VDPBF16PS from memory would repeat it P times on the load ports.
        int32_t pair0, pair1;
        std::memcpy(&pair0, xb + r * kBf16BlockColumns + 2 * line, 4);
        std::memcpy(&pair1, xb + r * kBf16BlockColumns + 2 * line + 2, 4);
        const __m512bh x0 = (__m512bh)_mm512_set1_epi32(pair0), x1 = (__m512bh)_mm512_set1_epi32(pair1);
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          even[r][p] = _mm512_dpbf16_ps(even[r][p], w0[p], x0);
          odd[r][p] = _mm512_dpbf16_ps(odd[r][p], w1[p], x1);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p)
      _mm512_storeu_ps(out + r * out_stride + p * kBf16PanelRows, _mm512_add_ps(even[r][p], odd[r][p]));
}

using TileFn = Bf16PanelTileFn<uint16_t>;

template <int P, size_t Ahead, size_t... R>
constexpr std::array<TileFn, sizeof...(R)> tiles(std::index_sequence<R...>) {
  return {&panel_tile<static_cast<int>(R) + 1, P, Ahead>...};
}

// Tiles of 1 to N rows times P panels.
template <int P, size_t Ahead, int N>
constexpr std::array<TileFn, N> kTiles = tiles<P, Ahead>(std::make_index_sequence<N>());

// One row: 4 panels side by side (8 accumulator chains). 2-3 rows: 2 panels. More rows: one
// panel at a time, so each weight line is loaded once per row tile and the weights stream in
// order. Prefill: tiles of up to 6 rows past two panels, broadcasting each input pair for both.
constexpr Bf16PanelTiles<uint16_t> kPanelTiles{
    kMaxStreamingRows,
    3,
    kMaxPanelByPanelRows,
    kMaxPrefillRows,
    kPanelsPerPass,
    {kTiles<4, kRowAheadBlocks, 1>.data(), kTiles<1, kRowAheadBlocks, 1>.data(), 4},
    {kTiles<2, kRowsAheadBlocks, 3>.data(), kTiles<1, kRowsAheadBlocks, kMaxStreamingRows>.data(), 2},
    {kTiles<1, kRowsAheadBlocks, kMaxStreamingRows>.data(), kTiles<1, kRowsAheadBlocks, kMaxStreamingRows>.data(), 1},
    {kTiles<1, kFetchNextPanel, kMaxStreamingRows>.data(), kTiles<1, kFetchNextPanel, kMaxStreamingRows>.data(), 1},
    {kTiles<2, 0, kMaxPrefillRows>.data(), kTiles<1, 0, kMaxPrefillRows>.data(), 2}};

}  // namespace

void bf16_panels_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  walk_bf16_panels(w, in, kPanelTiles, out, out_stride);
}

}  // namespace kipp::kernels::avx512
