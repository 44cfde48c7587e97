#include "kernels/cpu/matmul_avx512.h"

// GCC 12 reports its own _mm512_castsi256_si512 (an intentionally undefined upper half) as
// "used uninitialized" once inlined; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/avx512_sum.h"

#include <algorithm>
#include <utility>

#include "format/quant.h"
#include "kernels/ref/ops.h"

#define KIPP_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni,f16c,fma")))

namespace kipp::kernels::avx512 {
namespace {

// Outputs computed per pass over a block of inputs: a block of weight rows stays in L2 while
// every row tile of the input streams past it.
constexpr size_t kOutputsPerBlock = 8;
constexpr int kMaxRows = 4;
constexpr int kMaxOutputs = 8;

struct Tile {
  const PreparedInput* in;
  size_t row;  // first input row
  const uint8_t* weights;  // first weight row
  size_t row_bytes;
  float* out;  // out for (row, first weight row)
  size_t out_stride;
};

KIPP_AVX512 inline float f16(uint16_t bits) { return _cvtsh_ss(bits); }

// Lanes 0-7 = a, lanes 8-15 = b: one value per 32-element block of a 64-byte step.
KIPP_AVX512 inline __m512 pair(float a, float b) {
  return _mm512_mask_broadcastss_ps(_mm512_set1_ps(a), 0xFF00, _mm_set_ss(b));
}


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
template <int R, int C, bool Masked>
KIPP_AVX512 inline void bf16_step(__m512 (&acc)[R][C], const Tile& t, const uint16_t* x, size_t cols, size_t i,
                                  __mmask32 mask) {
  const auto load = [mask](const void* p) KIPP_AVX512 {
    return Masked ? _mm512_maskz_loadu_epi16(mask, p) : _mm512_loadu_si512(p);
  };
  __m512bh w[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) w[c] = (__m512bh)load(t.weights + c * t.row_bytes + i * 2);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const auto xv = (__m512bh)load(x + r * cols + i);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], xv, w[c]);
  }
}

// Decoding a quantized matrix is bound by the unpacking work as much as by memory, so the
// loads of the next tile's rows (at this offset) are started early instead of waiting for the
// hardware prefetcher.
KIPP_AVX512 inline void prefetch_ahead(const Tile& t, int output, int outputs, size_t offset) {
  _mm_prefetch(reinterpret_cast<const char*>(t.weights + static_cast<size_t>(outputs + output) * t.row_bytes + offset),
               _MM_HINT_T0);
}

template <int R, int C>
KIPP_AVX512 void bf16_tile(const Tile& t) {
  const size_t cols = t.in->cols;
  __m512 acc[R][C];
  clear(acc);
  const uint16_t* x = t.in->bf16 + t.row * cols;
  size_t i = 0;
#pragma GCC unroll 2
  for (; i + 32 <= cols; i += 32) bf16_step<R, C, false>(acc, t, x, cols, i, 0);
  if (i < cols) bf16_step<R, C, true>(acc, t, x, cols, i, static_cast<__mmask32>((1u << (cols - i)) - 1));
  store_reduced<R, C>(acc, t.out, t.out_stride);
}

// Q8_0 codes are signed, and VPDPBUSD multiplies unsigned by signed bytes: the weight codes
// are offset by 128 (w + 128 = w ^ 0x80) and 128 * (input code sum) is subtracted again by
// starting each 64-byte step's integer sum at that value.
template <int R, int C>
KIPP_AVX512 void q8_0_tile(const Tile& t) {
  const PreparedInput& in = *t.in;
  const size_t cols = in.cols, blocks = cols / 32;
  __m512 acc[R][C];
  clear(acc);
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  for (size_t b = 0; b < blocks; b += 2) {
    const bool both = b + 1 < blocks;
    __m512i w[C];
    __m512 w_scale[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const auto* block = reinterpret_cast<const BlockQ8_0*>(t.weights + c * t.row_bytes) + b;
      const __m256i first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block[0].q));
      const __m256i second = both ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block[1].q)) : _mm256_setzero_si256();
      w[c] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1), offset);
      w_scale[c] = pair(f16(block[0].scale_f16), both ? f16(block[1].scale_f16) : 0.0f);
      if constexpr (R <= 2) prefetch_ahead(t, c, C, b * sizeof(BlockQ8_0));
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const size_t row_block = (t.row + r) * blocks + b;
      const int8_t* codes = in.q8 + (t.row + r) * cols + b * 32;
      const __m512i x = both ? _mm512_loadu_si512(codes) : _mm512_maskz_loadu_epi8(0xFFFFFFFFull, codes);
      const int32_t second_sum = both ? in.q8_sum[row_block + 1] : 0;
      const __m512i start = _mm512_mask_set1_epi32(_mm512_maskz_set1_epi32(0x0001, -128 * in.q8_sum[row_block]), 0x0100,
                                                   -128 * second_sum);
      const __m512 x_scale = pair(in.q8_scale[row_block], both ? in.q8_scale[row_block + 1] : 0.0f);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512i sums = _mm512_dpbusd_epi32(start, w[c], x);
        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(w_scale[c], x_scale), acc[r][c]);
      }
    }
  }
  store_reduced<R, C>(acc, t.out, t.out_stride);
}

// affine4: codes 0..15 are already unsigned. Byte j of a block holds code j (low nibble) and
// code j + 16 (high nibble); the 64 codes of two blocks are put in input order before the
// product. The min term, min * (input scale * code sum), rides along in the same lanes as
// 1/8 of it per lane (exact: a power of two).
template <int R, int C>
KIPP_AVX512 void affine4_tile(const Tile& t) {
  const PreparedInput& in = *t.in;
  const size_t cols = in.cols, blocks = cols / 32;
  __m512 acc[R][C];
  clear(acc);
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  for (size_t b = 0; b < blocks; b += 2) {
    const bool both = b + 1 < blocks;
    __m512i w[C];
    __m512 w_scale[C], w_min[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const auto* block = reinterpret_cast<const BlockAffine4*>(t.weights + c * t.row_bytes) + b;
      const __m128i first = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block[0].nibbles));
      const __m128i second = both ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(block[1].nibbles)) : _mm_setzero_si128();
      const __m256i packed = _mm256_inserti128_si256(_mm256_castsi128_si256(first), second, 1);
      const __m256i low = _mm256_and_si256(packed, low_nibbles);
      const __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles);
      const __m512i halves = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);  // [lo0 lo1 hi0 hi1]
      w[c] = _mm512_shuffle_i64x2(halves, halves, _MM_SHUFFLE(3, 1, 2, 0));          // [lo0 hi0 lo1 hi1]
      w_scale[c] = pair(f16(block[0].scale_f16), both ? f16(block[1].scale_f16) : 0.0f);
      w_min[c] = pair(f16(block[0].min_f16), both ? f16(block[1].min_f16) : 0.0f);
      if constexpr (R <= 2) prefetch_ahead(t, c, C, b * sizeof(BlockAffine4));
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const size_t row_block = (t.row + r) * blocks + b;
      const int8_t* codes = in.q8 + (t.row + r) * cols + b * 32;
      const __m512i x = both ? _mm512_loadu_si512(codes) : _mm512_maskz_loadu_epi8(0xFFFFFFFFull, codes);
      const __m512 x_scale = pair(in.q8_scale[row_block], both ? in.q8_scale[row_block + 1] : 0.0f);
      const __m512 x_sum = _mm512_mul_ps(
          pair(in.q8_scaled_sum[row_block], both ? in.q8_scaled_sum[row_block + 1] : 0.0f), _mm512_set1_ps(0.125f));
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[c], x);
        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(w_scale[c], x_scale), acc[r][c]);
        acc[r][c] = _mm512_fmadd_ps(w_min[c], x_sum, acc[r][c]);
      }
    }
  }
  store_reduced<R, C>(acc, t.out, t.out_stride);
}

using TileFn = void (*)(const Tile&);

// Each kernel's tile shapes, chosen so accumulators, per-output values and the loads fit the 32
// vector registers: `rows` x `outputs` when many input rows share a step, 1-2 x
// `decode_outputs` when decoding (more weight rows streaming at once).
template <int R, int C>
struct Bf16Kernel {
  static constexpr int rows = 4, outputs = 4, decode_outputs = 8;
  static void run(const Tile& t) { bf16_tile<R, C>(t); }
};
template <int R, int C>
struct Q8Kernel {
  static constexpr int rows = 4, outputs = 4, decode_outputs = 8;
  static void run(const Tile& t) { q8_0_tile<R, C>(t); }
};
// Three values per output (codes, scales, mins) leave room for fewer accumulators.
template <int R, int C>
struct Affine4Kernel {
  static constexpr int rows = 3, outputs = 4, decode_outputs = 4;
  static void run(const Tile& t) { affine4_tile<R, C>(t); }
};

template <template <int, int> class Kernel>
struct TileTable {
  TileFn fns[kMaxRows][kMaxOutputs] = {};
};

template <template <int, int> class Kernel, int R, size_t... C>
constexpr void fill_row(TileFn (&row)[kMaxOutputs], std::index_sequence<C...>) {
  ((row[C] = &Kernel<R, static_cast<int>(C) + 1>::run), ...);
}

template <template <int, int> class Kernel>
constexpr TileTable<Kernel> make_table() {
  using Shape = Kernel<1, 1>;
  static_assert(Shape::rows <= kMaxRows && Shape::outputs <= kMaxOutputs && Shape::decode_outputs <= kMaxOutputs);
  TileTable<Kernel> table{};
  fill_row<Kernel, 1>(table.fns[0], std::make_index_sequence<Shape::decode_outputs>());
  fill_row<Kernel, 2>(table.fns[1], std::make_index_sequence<Shape::decode_outputs>());
  if constexpr (Shape::rows >= 3) fill_row<Kernel, 3>(table.fns[2], std::make_index_sequence<Shape::outputs>());
  if constexpr (Shape::rows >= 4) fill_row<Kernel, 4>(table.fns[3], std::make_index_sequence<Shape::outputs>());
  return table;
}

template <template <int, int> class Kernel>
void run_tiles(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  using Shape = Kernel<1, 1>;
  static constexpr TileTable<Kernel> table = make_table<Kernel>();
  for (size_t block = 0; block < w.rows; block += kOutputsPerBlock) {
    const size_t block_end = std::min(w.rows, block + kOutputsPerBlock);
    for (size_t row = 0; row < in.rows; row += Shape::rows) {
      const size_t rows = std::min<size_t>(Shape::rows, in.rows - row);
      const size_t width = rows <= 2 ? Shape::decode_outputs : Shape::outputs;
      for (size_t o = block; o < block_end; o += width) {
        const size_t outputs = std::min(width, block_end - o);
        const Tile tile{&in, row, w.data + o * w.row_bytes, w.row_bytes, out + row * out_stride + o, out_stride};
        table.fns[rows - 1][outputs - 1](tile);
      }
    }
  }
}

}  // namespace

bool supported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vnni") &&
         __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
}

void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  switch (w.type) {
    case GgmlType::BF16:
      return run_tiles<Bf16Kernel>(w, in, out, out_stride);
    case GgmlType::Q8_0:
      return run_tiles<Q8Kernel>(w, in, out, out_stride);
    case GgmlType::Q4_1:
      return run_tiles<Affine4Kernel>(w, in, out, out_stride);
    default:
      return ref::matmul(w, in, out, out_stride);
  }
}

}  // namespace kipp::kernels::avx512
