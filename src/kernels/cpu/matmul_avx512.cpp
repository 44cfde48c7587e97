#include "kernels/cpu/matmul_avx512.h"

// GCC 12 reports its own _mm512_castsi256_si512 (an intentionally undefined upper half) as
// "used uninitialized" once inlined; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning group; clang warns about the unknown name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kernels/cpu/avx512_sum.h"
#include "kernels/cpu/bf16_panels.h"
#include "kernels/cpu/cpuid_features.h"
#include "kernels/cpu/matmul_bf16_panels_avx512.h"
#include "kernels/cpu/matmul_int8_avx512.h"
#include "kernels/cpu/row_major_tiles.h"

#include <algorithm>
#include <utility>

#include "format/quant.h"
#include "kernels/ref/ops.h"

#define KIPP_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni,f16c,fma")))

namespace kipp::kernels::avx512 {
namespace {

// The row-major BF16 kernel below serves matrices that are not whole BF16 panels (packed
// matrices go to bf16_panels_matmul); its tuning below is for all kinds of matrices alike.

// Outputs computed per pass over the input rows: a block of weight rows stays in L2 while every
// row tile of the input streams past it. With many rows the input is the larger stream, read
// fewer times with 32 outputs per block (prefill in `kipp bench`); decoding streams weights,
// which fetch ahead better in blocks of 8.
constexpr size_t kOutputsPerBlock = 8;
constexpr size_t kPrefillOutputsPerBlock = 32;

struct Tile {
  const PreparedInput* in;
  size_t row;                   // first input row
  const uint8_t* weights;       // first weight row
  const uint8_t* next_weights;  // the rows to fetch ahead, as many as the tile's
  size_t row_bytes;
  float* out;  // out for (row, first weight row)
  size_t out_stride;
};

template <int R, int C>
KIPP_AVX512 inline void clear(__m512 (&acc)[R][C]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
}

// Writes acc[r][c] reduced to out[r * out_stride + c].
template <int R, int C>
KIPP_AVX512 inline void store_reduced(const __m512 (&acc)[R][C], float* out, size_t out_stride) {
  constexpr int kCount = R * C;
  for (int first = 0; first < kCount; first += 16) {
    __m512 group[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      group[i] = first + i < kCount ? acc[(first + i) / C][(first + i) % C] : _mm512_setzero_ps();
    alignas(64) float sums[16];
    _mm512_store_ps(sums, reduce16(group));
    for (int i = 0; i < 16 && first + i < kCount; ++i) out[((first + i) / C) * out_stride + (first + i) % C] = sums[i];
  }
}

// One 32-element step of every accumulator of a BF16 tile (the row's tail masked).
template <int R, int C, bool Prefetch, bool Masked>
KIPP_AVX512 inline void bf16_step(__m512 (&acc)[R][C], const Tile& t, const uint16_t* x, size_t cols, size_t i,
                                  __mmask32 mask) {
  const auto load = [mask](const void* p)
                        KIPP_AVX512 { return Masked ? _mm512_maskz_loadu_epi16(mask, p) : _mm512_loadu_si512(p); };
  __m512bh w[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    w[c] = (__m512bh)load(t.weights + c * t.row_bytes + i * 2);
    if constexpr (Prefetch)
      _mm_prefetch(reinterpret_cast<const char*>(t.next_weights + c * t.row_bytes + i * 2), _MM_HINT_T1);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const auto xv = (__m512bh)load(x + r * cols + i);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], xv, w[c]);
  }
}

template <int R, int C, bool Prefetch>
KIPP_AVX512 void bf16_tile(const Tile& t) {
  const size_t cols = t.in->cols;
  __m512 acc[R][C];
  clear(acc);
  const uint16_t* x = t.in->bf16 + t.row * cols;
  size_t i = 0;
#pragma GCC unroll 2
  for (; i + 32 <= cols; i += 32) bf16_step<R, C, Prefetch, false>(acc, t, x, cols, i, 0);
  if (i < cols) bf16_step<R, C, Prefetch, true>(acc, t, x, cols, i, static_cast<__mmask32>((1u << (cols - i)) - 1));
  store_reduced<R, C>(acc, t.out, t.out_stride);
}

using TileFn = void (*)(const Tile&);

// Tile shapes, chosen so accumulators, weight vectors and the input vector fit the 32 vector
// registers: up to 4 rows x 4 outputs when many input rows share a step, 1-2 rows x 8 outputs
// when decoding (more weight rows streaming at once). (One tile of 5-8 rows x 3 outputs for
// batched decoding would be no faster, bench/kernel_bench.)
constexpr int kMaxRows = 4;
constexpr int kMaxOutputs = 8;
constexpr int tile_outputs(int rows) { return rows <= 2 ? 8 : 4; }

struct TileTable {
  TileFn fns[2][kMaxRows][kMaxOutputs] = {};  // [prefetching][rows - 1][outputs - 1]
};

template <int R, size_t... C>
constexpr void fill_row(TileFn (&row)[kMaxOutputs], TileFn (&prefetching)[kMaxOutputs], std::index_sequence<C...>) {
  ((row[C] = &bf16_tile<R, static_cast<int>(C) + 1, false>), ...);
  ((prefetching[C] = &bf16_tile<R, static_cast<int>(C) + 1, true>), ...);
}

template <size_t... R>
constexpr TileTable make_table(std::index_sequence<R...>) {
  TileTable table{};
  (fill_row<static_cast<int>(R) + 1>(table.fns[0][R], table.fns[1][R], std::make_index_sequence<tile_outputs(R + 1)>()),
   ...);
  return table;
}

void bf16_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  static constexpr TileTable table = make_table(std::make_index_sequence<kMaxRows>());
  const size_t per_block = in.rows > kMaxRows ? kPrefillOutputsPerBlock : kOutputsPerBlock;
  const auto width = [](size_t rows) { return tile_outputs(static_cast<int>(rows)); };
  for_each_row_major_tile(w.rows, in.rows, per_block, kMaxRows, width,
                          [&](size_t row, size_t rows, size_t o, size_t outputs, bool fetch) {
                            const Tile tile{&in,
                                            row,
                                            w.data + o * w.row_bytes,
                                            w.data + (o + per_block) * w.row_bytes,
                                            w.row_bytes,
                                            out + row * out_stride + o,
                                            out_stride};
                            table.fns[fetch ? 1 : 0][rows - 1][outputs - 1](tile);
                          });
}

}  // namespace

bool supported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vnni") && cpu_has_f16c() &&
         __builtin_cpu_supports("fma");
}

bool packs_weights(const WeightMatrix& w) { return stores_bf16_panels(w) || stores_panels(w); }

bool pack_weights(const WeightMatrix& w, uint8_t* out) {
  if (stores_bf16_panels(w)) {
    pack_bf16_panels(w, out);
    return true;
  }
  if (!stores_panels(w)) return false;
  pack_quantized_panels(w, out);
  return true;
}

void dequantize_row(const WeightMatrix& w, size_t row, float* out) {
  if (w.type == GgmlType::BF16 && w.panels) return dequantize_bf16_panel_row(w, row, out);
  ref::dequantize_row(w, row, out);
}

void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  switch (w.type) {
    case GgmlType::BF16:
      if (w.panels) return bf16_panels_matmul(w, in, out, out_stride);
      return bf16_matmul(w, in, out, out_stride);
    case GgmlType::Q8_0:
    case GgmlType::Q4_1: return quantized_matmul(w, in, out, out_stride);
    default: return ref::matmul(w, in, out, out_stride);
  }
}

}  // namespace kipp::kernels::avx512
