#include "kernels/cpu/matmul_int8_amx.h"

// GCC 12 reports its own _mm512_castsi256_si512 (an intentionally undefined upper half) as
// "used uninitialized" once inlined; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning group; clang warns about the unknown name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/matmul_amx.h"
#include "kernels/cpu/matmul_int8_avx512.h"
#include "kernels/cpu/quant_block_step.h"

#define KIPP_AMX_INT8 \
  __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c,fma")))

namespace kipp::kernels::amx {
namespace {

using avx512::kPanelRows;
constexpr size_t kBlockColumns = 32;
constexpr size_t kCodeVectors = 8;  // 64-byte rows of a block's weight tile
// Panels per pass over the input rows when there are more than 16 (prefill): 8 panels of up to
// 3072 columns stay in L2 while every group of rows passes them, so weights are read once.
constexpr size_t kPanelsPerPass = 8;
// How far ahead the first group of rows fetches the panel's blocks into L2, as the VNNI kernel
// does (matmul_int8_avx512.cpp).
constexpr size_t kFetchAheadBlocks = 8;

// Blocks whose products are stored together, then scaled: the vector loads of a tile's sums
// wait until its store has reached the cache, so one wait serves several blocks.
constexpr size_t kBlocksPerRound = 4;

// The tile registers: C0..C3 the integer sums of a round's blocks (rows x 16 outputs, int32); A4,
// A6 a block's input codes (rows x 32 bytes), B5, B7 its weight codes (8 rows of 64 bytes).
TileConfig config_for_rows(size_t rows) {
  TileConfig config;
  for (int tile = 0; tile < 8; ++tile) {
    const bool weights = tile == 5 || tile == 7, inputs = tile == 4 || tile == 6;
    config.rows[tile] = static_cast<uint8_t>(weights ? kCodeVectors : rows);
    config.bytes_per_row[tile] = inputs ? kBlockColumns : 64;
  }
  return config;
}

// Affine4 codes of `count` consecutive blocks from `block` on, one per byte (the weight tiles'
// layout) in `codes`, 512 bytes per block. (Spreading them a round ahead, so that the tile loads
// never wait for these stores, is no faster in bench/kernel_bench, and simpler this way.)
KIPP_AMX_INT8 inline void spread_affine_codes(const uint8_t* block, size_t count, uint8_t* codes) {
  constexpr avx512::StoredPanelBlock layout = avx512::stored_panel_block(true);
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* nibbles = block + i * layout.bytes + layout.codes_offset;
    uint8_t* spread = codes + i * kCodeVectors * 64;
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {
      const __m512i both = _mm512_loadu_si512(nibbles + 64 * h);
      _mm512_store_si512(spread + 64 * h, _mm512_and_si512(both, low));
      _mm512_store_si512(spread + 64 * (h + 4), _mm512_and_si512(_mm512_srli_epi16(both, 4), low));
    }
  }
}

// The integer sums of `count` (1-4) consecutive blocks, into tiles C0..C3: block i's input codes
// from x + 32 i, its weight codes (8 rows of 64 bytes) from weights + i * weights_stride. GCC's
// tile intrinsics take the register numbers as literals.
KIPP_AMX_INT8 inline void multiply_blocks(const int8_t* x, size_t x_stride, const uint8_t* weights,
                                          size_t weights_stride, size_t count) {
  memory_barrier();
  _tile_zero(0);
  _tile_loadd(4, x, x_stride);
  _tile_loadd(5, weights, 64);
  _tile_dpbsud(0, 4, 5);
  if (count > 1) {
    _tile_zero(1);
    _tile_loadd(6, x + kBlockColumns, x_stride);
    _tile_loadd(7, weights + weights_stride, 64);
    _tile_dpbsud(1, 6, 7);
  }
  if (count > 2) {
    _tile_zero(2);
    _tile_loadd(4, x + 2 * kBlockColumns, x_stride);
    _tile_loadd(5, weights + 2 * weights_stride, 64);
    _tile_dpbsud(2, 4, 5);
  }
  if (count > 3) {
    _tile_zero(3);
    _tile_loadd(6, x + 3 * kBlockColumns, x_stride);
    _tile_loadd(7, weights + 3 * weights_stride, 64);
    _tile_dpbsud(3, 6, 7);
  }
}

// Stores tiles C0..C(count - 1), each to its rows x 16 sums.
KIPP_AMX_INT8 inline void store_sums(size_t count, int32_t (*sums)[kTileRows * kTileRows]) {
  constexpr size_t stride = kTileRows * sizeof(int32_t);
  _tile_stored(0, sums[0], stride);
  if (count > 1) _tile_stored(1, sums[1], stride);
  if (count > 2) _tile_stored(2, sums[2], stride);
  if (count > 3) _tile_stored(3, sums[3], stride);
  memory_barrier();
}

// Adds block b's integer sums (M rows x 16 outputs; Q8_0's less 128 x the input code sum, which
// its offset codes added) to the accumulators, scaled as the reference does.
template <int M, bool Affine>
KIPP_AMX_INT8 inline void finish_block(__m512 (&acc)[M], const uint8_t* block, const PreparedInput& in, size_t row,
                                       size_t b, const int32_t* sums, bool fetch_ahead) {
  constexpr size_t block_bytes = avx512::stored_panel_block(Affine).bytes;
  const size_t blocks = in.cols / kBlockColumns;
  if (fetch_ahead)
    for (size_t line = 0; line < block_bytes; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(block + kFetchAheadBlocks * block_bytes + line), _MM_HINT_T1);
  const __m512 scales = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block)));
  const __m512 mins =
      Affine ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 32))) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int r = 0; r < M; ++r) {
    const size_t at = (row + r) * blocks + b;
    __m512i s = _mm512_load_si512(sums + r * kPanelRows);
    if constexpr (!Affine) s = _mm512_sub_epi32(s, _mm512_set1_epi32(128 * in.q8_sum[at]));
    acc[r] = cpu::add_block<Affine>(acc[r], scales, mins, s, in.q8_scale[at], Affine ? in.q8_scaled_sum[at] : 0.0f);
  }
}

// M input rows from `row` times one stored panel, block by block.
template <int M, bool Affine>
KIPP_AMX_INT8 void panel_rows(const uint8_t* panel, const PreparedInput& in, size_t row, float* out, size_t out_stride,
                              bool fetch_ahead) {
  constexpr avx512::StoredPanelBlock layout = avx512::stored_panel_block(Affine);
  const size_t cols = in.cols, blocks = cols / kBlockColumns;
  const int8_t* x = in.q8 + row * cols;
  alignas(64) int32_t sums[kBlocksPerRound][kTileRows * kTileRows];
  alignas(64) uint8_t codes[Affine ? kBlocksPerRound * kCodeVectors * 64 : 1];
  __m512 acc[M];
#pragma GCC unroll 16
  for (int r = 0; r < M; ++r) acc[r] = _mm512_setzero_ps();
  for (size_t b = 0; b < blocks; b += kBlocksPerRound) {
    const size_t count = std::min(kBlocksPerRound, blocks - b);
    const uint8_t* weights = panel + b * layout.bytes + layout.codes_offset;
    size_t weights_stride = layout.bytes;
    if constexpr (Affine) {
      spread_affine_codes(panel + b * layout.bytes, count, codes);
      weights = codes;
      weights_stride = kCodeVectors * 64;
    }
    multiply_blocks(x + b * kBlockColumns, cols, weights, weights_stride, count);
    store_sums(count, sums);
    for (size_t i = 0; i < count; ++i)
      finish_block<M, Affine>(acc, panel + (b + i) * layout.bytes, in, row, b + i, sums[i], fetch_ahead);
  }
#pragma GCC unroll 16
  for (int r = 0; r < M; ++r) _mm512_storeu_ps(out + r * out_stride, acc[r]);
}

using PanelRows = void (*)(const uint8_t*, const PreparedInput&, size_t, float*, size_t, bool);
template <bool Affine, size_t... M>
constexpr std::array<PanelRows, sizeof...(M)> panel_rows_table(std::index_sequence<M...>) {
  return {&panel_rows<static_cast<int>(M) + 1, Affine>...};
}
constexpr auto kPanelRowsQ8 = panel_rows_table<false>(std::make_index_sequence<kTileRows>());
constexpr auto kPanelRowsAffine = panel_rows_table<true>(std::make_index_sequence<kTileRows>());

bool cpu_has_amx_int8() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  constexpr unsigned kAmxInt8 = 1u << 25;
  return (edx & kAmxInt8) != 0;
}

}  // namespace

bool int8_supported() {
  static const bool usable = supported() && cpu_has_amx_int8();
  return usable;
}

bool int8_tiles_for_rows(size_t rows) { return rows >= kMinTileRows && int8_supported(); }

// Groups of 16 input rows and one of the rest; with more than one group, passes of
// kPanelsPerPass panels that every group multiplies before the next pass.
KIPP_AMX_INT8 void quantized_panels_matmul(const WeightMatrix& w, const PreparedInput& in, float* out,
                                           size_t out_stride) {
  const auto& table = w.type == GgmlType::Q4_1 ? kPanelRowsAffine : kPanelRowsQ8;
  const size_t panels = w.rows / kPanelRows, panel_bytes = kPanelRows * w.row_bytes;
  const size_t groups = (in.rows + kTileRows - 1) / kTileRows;
  size_t configured = 0;
  for (size_t pass = 0; pass < panels; pass += kPanelsPerPass) {
    const size_t pass_end = std::min(panels, pass + kPanelsPerPass);
    for (size_t g = 0; g < groups; ++g) {
      const size_t first = g * kTileRows, rows = std::min(kTileRows, in.rows - first);
      if (rows != configured) {
        const TileConfig config = config_for_rows(rows);
        memory_barrier();
        _tile_loadconfig(&config);
        configured = rows;
      }
      for (size_t p = pass; p < pass_end; ++p)
        table[rows - 1](w.data + p * panel_bytes, in, first, out + first * out_stride + p * kPanelRows, out_stride,
                        g == 0);
    }
  }
  _tile_release();
}

}  // namespace kipp::kernels::amx
