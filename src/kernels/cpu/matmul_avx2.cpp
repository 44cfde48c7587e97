#include "kernels/cpu/matmul_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/cpu/bf16_panels.h"
#include "kernels/cpu/cpuid_features.h"
#include "kernels/cpu/matmul_bf16_panels_avx2.h"
#include "kernels/cpu/matmul_int8_avx2.h"
#include "kernels/cpu/row_major_tiles.h"
#include "kernels/ref/ops.h"

namespace kipp::kernels::avx2 {
namespace {

// Outputs per pass over the input rows: a block of weight rows stays in cache while every row
// tile streams past it (more outputs per block when many rows make the input the larger stream).
constexpr size_t kOutputsPerBlock = 8;
constexpr size_t kPrefillOutputsPerBlock = 32;
// BF16 values per step: one 256-bit load, widened into two FP32 vectors.
constexpr size_t kStep = 16;

struct Tile {
  const uint16_t* x;  // first input row
  size_t cols;
  const uint8_t* weights;  // first weight row
  // The rows to fetch ahead into L2 as the tile's are read (as many as the tile's), or null.
  const uint8_t* next_weights;
  size_t row_bytes;
  float* out;  // out for (first row, first weight row)
  size_t out_stride;
};

// 16 BF16 values as FP32: those at even positions, then those at odd ones (shifts and masks,
// which leave the shuffle port to the loads' neighbours). Weights and inputs are widened alike,
// so each product pairs the right values; only the lanes they are summed in differ from the
// stored order.
struct Wide {
  __m256 even, odd;
};
KIPP_AVX2 inline Wide widen(const uint16_t* p) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)),
          _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))))};
}

KIPP_AVX2 inline float reduce(__m256 v) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return _mm_cvtss_f32(sum);
}

// One step of every accumulator of an R x C tile, reading weights and inputs at `w[c]`, `x[r]`.
template <int R, int C>
KIPP_AVX2 inline void step(__m256 (&acc)[R][C], const uint16_t* const (&w)[C], const uint16_t* const (&x)[R]) {
  Wide weights[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) weights[c] = widen(w[c]);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const Wide input = widen(x[r]);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      acc[r][c] = _mm256_fmadd_ps(input.even, weights[c].even, acc[r][c]);
      acc[r][c] = _mm256_fmadd_ps(input.odd, weights[c].odd, acc[r][c]);
    }
  }
}

template <int R, int C>
KIPP_AVX2 void bf16_tile(const Tile& t) {
  __m256 acc[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  const uint16_t* w[C];
  const uint16_t* x[R];
  size_t i = 0;
  for (; i + kStep <= t.cols; i += kStep) {
    for (int c = 0; c < C; ++c) w[c] = reinterpret_cast<const uint16_t*>(t.weights + c * t.row_bytes) + i;
    for (int r = 0; r < R; ++r) x[r] = t.x + r * t.cols + i;
    if (t.next_weights != nullptr && i % 32 == 0)
      for (int c = 0; c < C; ++c)
        _mm_prefetch(reinterpret_cast<const char*>(t.next_weights + c * t.row_bytes + i * 2), _MM_HINT_T1);
    step<R, C>(acc, w, x);
  }
  if (i < t.cols) {
    // The row's tail, zero-padded to a whole step.
    uint16_t w_tail[C][kStep] = {}, x_tail[R][kStep] = {};
    const size_t bytes = (t.cols - i) * sizeof(uint16_t);
    for (int c = 0; c < C; ++c) {
      std::memcpy(w_tail[c], t.weights + c * t.row_bytes + i * sizeof(uint16_t), bytes);
      w[c] = w_tail[c];
    }
    for (int r = 0; r < R; ++r) {
      std::memcpy(x_tail[r], t.x + r * t.cols + i, bytes);
      x[r] = x_tail[r];
    }
    step<R, C>(acc, w, x);
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) t.out[r * t.out_stride + c] = reduce(acc[r][c]);
}

using TileFn = void (*)(const Tile&);

// Tile shapes for the 16 vector registers: accumulators, the tile's weight vectors and one input
// vector. One row takes 8 outputs (8 independent FMA chains); more rows share fewer outputs'
// weights.
constexpr int kMaxRows = 4;
constexpr int kMaxOutputs = 8;
constexpr int tile_outputs(int rows) { return rows == 1 ? 8 : rows == 2 ? 4 : 3; }

struct TileTable {
  TileFn fns[kMaxRows][kMaxOutputs] = {};  // [rows - 1][outputs - 1]
};

template <int R, size_t... C>
constexpr void fill_row(TileFn (&row)[kMaxOutputs], std::index_sequence<C...>) {
  ((row[C] = &bf16_tile<R, static_cast<int>(C) + 1>), ...);
}

template <size_t... R>
constexpr TileTable make_table(std::index_sequence<R...>) {
  TileTable table{};
  (fill_row<static_cast<int>(R) + 1>(table.fns[R], std::make_index_sequence<tile_outputs(R + 1)>()), ...);
  return table;
}

void bf16_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  static constexpr TileTable table = make_table(std::make_index_sequence<kMaxRows>());
  const size_t per_block = in.rows > kMaxRows ? kPrefillOutputsPerBlock : kOutputsPerBlock;
  const auto width = [](size_t rows) { return tile_outputs(static_cast<int>(rows)); };
  for_each_row_major_tile(
      w.rows, in.rows, per_block, kMaxRows, width, [&](size_t row, size_t rows, size_t o, size_t outputs, bool fetch) {
        const uint8_t* next = o + per_block < w.rows && fetch ? w.data + (o + per_block) * w.row_bytes : nullptr;
        const Tile tile{in.bf16 + row * in.cols,    in.cols,   w.data + o * w.row_bytes, next, w.row_bytes,
                        out + row * out_stride + o, out_stride};
        table.fns[rows - 1][outputs - 1](tile);
      });
}

}  // namespace

bool supported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}

bool packs_weights(const WeightMatrix& w) { return stores_bf16_panels(w) || packs_quantized(w); }

bool pack_weights(const WeightMatrix& w, uint8_t* out) {
  if (!stores_bf16_panels(w)) return pack_quantized(w, out);
  pack_bf16_panels(w, out);
  return true;
}

void dequantize_row(const WeightMatrix& w, size_t row, float* out) {
  if (w.type == GgmlType::BF16 && w.panels) return dequantize_bf16_panel_row(w, row, out);
  ref::dequantize_row(w, row, out);
}

void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  if (w.type == GgmlType::BF16 && in.format == InputFormat::BF16)
    return w.panels ? bf16_panels_matmul(w, in, out, out_stride) : bf16_matmul(w, in, out, out_stride);
  if ((w.type == GgmlType::Q8_0 || w.type == GgmlType::Q4_1) && in.format == InputFormat::Q8)
    return quantized_matmul(w, in, out, out_stride);
  ref::matmul(w, in, out, out_stride);
}

}  // namespace kipp::kernels::avx2
