#include "kernels/cpu/matmul_neon.h"

#include <arm_neon.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <utility>

#if defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#include "format/quant.h"
#include "kernels/cpu/row_major_tiles.h"
#include "kernels/ref/ops.h"

// The optional instructions, compiled per function so the library itself runs on every ARMv8-A.
#if defined(__clang__)
#define KIPP_DOTPROD __attribute__((target("dotprod")))
#define KIPP_BF16 __attribute__((target("bf16")))
#else
#define KIPP_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#define KIPP_BF16 __attribute__((target("arch=armv8.2-a+bf16")))
#endif
// Whether this compiler offers an optional instruction's intrinsics to a function compiled for
// it: GCC does; older clang (arm_neon.h before LLVM 17 at least) only to a whole build compiled
// for the feature, and without it the instruction is left unused.
#if !defined(__clang__) || __clang_major__ >= 17
#define KIPP_TARGET_INTRINSICS 1
#else
#define KIPP_TARGET_INTRINSICS 0
#endif
#if KIPP_TARGET_INTRINSICS || defined(__ARM_FEATURE_DOTPROD)
#define KIPP_HAS_SDOT 1
#else
#define KIPP_HAS_SDOT 0
#endif
#if KIPP_TARGET_INTRINSICS || defined(__ARM_FEATURE_BF16)
#define KIPP_HAS_BFDOT 1
#else
#define KIPP_HAS_BFDOT 0
#endif
#define KIPP_INLINE __attribute__((always_inline)) inline
// A tile function takes in every call below it, so a step compiled for an optional instruction
// is inlined where that instruction is enabled (always_inline would try the generic body first).
#define KIPP_FLATTEN __attribute__((flatten))

namespace kipp::kernels::neon {
namespace {

// ---- BF16 weights on BF16 inputs ------------------------------------------------------------

// Outputs per pass over the input rows: a block of weight rows stays in cache while every row
// tile streams past it (more outputs per block when many rows make the input the larger stream).
constexpr size_t kOutputsPerBlock = 8;
constexpr size_t kPrefillOutputsPerBlock = 32;
// BF16 values per step: one 128-bit load.
constexpr size_t kStep = 8;

struct Tile {
  const uint16_t* x;  // first input row
  size_t cols;
  const uint8_t* weights;  // first weight row
  // The rows to fetch ahead as the tile's are read (as many as the tile's), or null.
  const uint8_t* next_weights;
  size_t row_bytes;
  float* out;  // out for (first row, first weight row)
  size_t out_stride;
};

// 8 BF16 values as FP32: those at even positions, then those at odd ones (a BF16 value is the
// upper half of its FP32 value). Weights and inputs are widened alike, so each product pairs the
// right values; only the lanes they are summed in differ from the stored order.
struct Wide {
  float32x4_t even, odd;
};
KIPP_INLINE Wide widen(const uint16_t* p) {
  const uint32x4_t v = vreinterpretq_u32_u16(vld1q_u16(p));
  return {vreinterpretq_f32_u32(vshlq_n_u32(v, 16)), vreinterpretq_f32_u32(vandq_u32(v, vdupq_n_u32(0xFFFF0000u)))};
}

// One step of every accumulator of an R x C tile, reading weights and inputs at `w[c]`, `x[r]`:
// widened, two FMAs per pair.
struct WidenStep {
  template <int R, int C>
  static void run(float32x4_t (&acc)[R][C], const uint16_t* const (&w)[C], const uint16_t* const (&x)[R]) {
    Wide weights[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) weights[c] = widen(w[c]);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const Wide input = widen(x[r]);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        acc[r][c] = vfmaq_f32(acc[r][c], input.even, weights[c].even);
        acc[r][c] = vfmaq_f32(acc[r][c], input.odd, weights[c].odd);
      }
    }
  }
};

#if KIPP_HAS_BFDOT
// The same step with BFDOT: each lane adds the products of one pair of neighbouring values.
struct BfdotStep {
  template <int R, int C>
  static KIPP_BF16 void run(float32x4_t (&acc)[R][C], const uint16_t* const (&w)[C], const uint16_t* const (&x)[R]) {
    bfloat16x8_t weights[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) weights[c] = vreinterpretq_bf16_u16(vld1q_u16(w[c]));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const bfloat16x8_t input = vreinterpretq_bf16_u16(vld1q_u16(x[r]));
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = vbfdotq_f32(acc[r][c], input, weights[c]);
    }
  }
};
#endif

template <class Step, int R, int C>
void bf16_tile_body(const Tile& t) {
  float32x4_t acc[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = vdupq_n_f32(0);
  const uint16_t* w[C];
  const uint16_t* x[R];
  size_t i = 0;
  for (; i + kStep <= t.cols; i += kStep) {
    for (int c = 0; c < C; ++c) w[c] = reinterpret_cast<const uint16_t*>(t.weights + c * t.row_bytes) + i;
    for (int r = 0; r < R; ++r) x[r] = t.x + r * t.cols + i;
    if (t.next_weights != nullptr && i % 32 == 0)
      for (int c = 0; c < C; ++c) __builtin_prefetch(t.next_weights + c * t.row_bytes + i * 2, 0, 2);
    Step::template run<R, C>(acc, w, x);
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
    Step::template run<R, C>(acc, w, x);
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) t.out[r * t.out_stride + c] = vaddvq_f32(acc[r][c]);
}

template <int R, int C>
KIPP_FLATTEN void bf16_tile(const Tile& t) {
  bf16_tile_body<WidenStep, R, C>(t);
}

#if KIPP_HAS_BFDOT
template <int R, int C>
KIPP_BF16 KIPP_FLATTEN void bf16_tile_bfdot(const Tile& t) {
  bf16_tile_body<BfdotStep, R, C>(t);
}
#endif

using TileFn = void (*)(const Tile&);

// Tile shapes for the 32 vector registers: accumulators, the tile's widened weights and one
// widened input. One row takes 8 outputs (8 independent FMA chains); more rows share fewer
// outputs' weights.
constexpr int kMaxRows = 4;
constexpr int kMaxOutputs = 8;
constexpr int tile_outputs(int rows) { return rows == 1 ? 8 : rows == 2 ? 6 : 4; }

struct TileTable {
  TileFn fns[kMaxRows][kMaxOutputs] = {};  // [rows - 1][outputs - 1]
};

template <bool Bfdot, int R, size_t... C>
constexpr void fill_row(TileFn (&row)[kMaxOutputs], std::index_sequence<C...>) {
#if KIPP_HAS_BFDOT
  if constexpr (Bfdot) {
    ((row[C] = &bf16_tile_bfdot<R, static_cast<int>(C) + 1>), ...);
    return;
  }
#endif
  ((row[C] = &bf16_tile<R, static_cast<int>(C) + 1>), ...);
}

template <bool Bfdot, size_t... R>
constexpr TileTable make_table(std::index_sequence<R...>) {
  TileTable table{};
  (fill_row<Bfdot, static_cast<int>(R) + 1>(table.fns[R], std::make_index_sequence<tile_outputs(R + 1)>()), ...);
  return table;
}

void bf16_matmul(bool bfdot, const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  static constexpr TileTable widened = make_table<false>(std::make_index_sequence<kMaxRows>());
  static constexpr TileTable dotted = make_table<true>(std::make_index_sequence<kMaxRows>());
  const TileTable& table = bfdot ? dotted : widened;
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

// ---- Q8_0 and affine4 weights on Q8 inputs --------------------------------------------------
// A tile is up to 4 input rows x 4 outputs, one output per lane: per 32-column block, the exact
// integer sum of every (row, output) pair, then the reference's float step on the 4 lanes at once
// (this file is compiled with -ffp-contract=off: a fused multiply-add would round once, not twice).

constexpr size_t kQuantRows = 4;
constexpr size_t kQuantOutputs = 4;

// One weight block's 32 codes as signed bytes: Q8_0's as stored, affine4's nibbles (code j < 16
// the low nibble of byte j, code j + 16 the high one).
struct Codes {
  int8x16_t low, high;  // codes 0..15, 16..31
};
template <bool Affine>
KIPP_INLINE Codes block_codes(const uint8_t* block) {
  if constexpr (Affine) {
    const uint8x16_t nibbles = vld1q_u8(reinterpret_cast<const BlockAffine4*>(block)->nibbles);
    return {vreinterpretq_s8_u8(vandq_u8(nibbles, vdupq_n_u8(0x0F))), vreinterpretq_s8_u8(vshrq_n_u8(nibbles, 4))};
  } else {
    const int8_t* q = reinterpret_cast<const BlockQ8_0*>(block)->q;
    return {vld1q_s8(q), vld1q_s8(q + 16)};
  }
}

#if KIPP_HAS_SDOT
// The 32 products of one block, in int32 lanes whose sum is the block's integer dot.
struct DotStep {
  static KIPP_DOTPROD int32x4_t run(const Codes& w, int8x16_t x_low, int8x16_t x_high) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w.low, x_low), w.high, x_high);
  }
};
#endif
// The same without SDOT: 16-bit products (|w x| <= 128 x 127 fits) added pairwise into int32 lanes.
struct WideningStep {
  static int32x4_t run(const Codes& w, int8x16_t x_low, int8x16_t x_high) {
    int32x4_t acc = vpaddlq_s16(vmull_s8(vget_low_s8(w.low), vget_low_s8(x_low)));
    acc = vpadalq_s16(acc, vmull_high_s8(w.low, x_low));
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w.high), vget_low_s8(x_high)));
    return vpadalq_s16(acc, vmull_high_s8(w.high, x_high));
  }
};

// The 4 weight rows' FP16 fields at byte `offset` of block b, as FP32 lanes.
KIPP_INLINE float32x4_t block_halves(const uint8_t* const (&rows)[kQuantOutputs], size_t block_bytes, size_t b,
                                     size_t offset) {
  uint16_t bits[kQuantOutputs];
  for (size_t c = 0; c < kQuantOutputs; ++c) std::memcpy(&bits[c], rows[c] + b * block_bytes + offset, 2);
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(bits)));
}

struct QuantTile {
  const PreparedInput* in;
  size_t row;                          // first input row
  const uint8_t* rows[kQuantOutputs];  // the weight rows (a partial tile repeats its last)
  size_t outputs;                      // outputs stored
  float* out;                          // out for (first row, first output)
  size_t out_stride;
};

template <class Step, bool Affine, int R>
void quant_tile_body(const QuantTile& t) {
  constexpr size_t kBlockBytes = Affine ? sizeof(BlockAffine4) : sizeof(BlockQ8_0);
  const PreparedInput& in = *t.in;
  const size_t blocks = in.cols / kInputBlock;
  float32x4_t acc[R];
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0);
  for (size_t b = 0; b < blocks; ++b) {
    int8x16_t x_low[R], x_high[R];
    for (int r = 0; r < R; ++r) {
      const int8_t* x = in.q8 + (t.row + r) * in.cols + b * kInputBlock;
      x_low[r] = vld1q_s8(x);
      x_high[r] = vld1q_s8(x + 16);
    }
    int32x4_t partial[R][kQuantOutputs];
#pragma GCC unroll 4
    for (size_t c = 0; c < kQuantOutputs; ++c) {
      const Codes w = block_codes<Affine>(t.rows[c] + b * kBlockBytes);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) partial[r][c] = Step::run(w, x_low[r], x_high[r]);
    }
    constexpr size_t kScaleOffset = Affine ? offsetof(BlockAffine4, scale_f16) : offsetof(BlockQ8_0, scale_f16);
    const float32x4_t scales = block_halves(t.rows, kBlockBytes, b, kScaleOffset);
    [[maybe_unused]] float32x4_t mins;
    if constexpr (Affine) mins = block_halves(t.rows, kBlockBytes, b, offsetof(BlockAffine4, min_f16));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // Lane c: the block sum of output c (integer adds, exact in any order).
      const int32x4_t sums =
          vpaddq_s32(vpaddq_s32(partial[r][0], partial[r][1]), vpaddq_s32(partial[r][2], partial[r][3]));
      const size_t block = (t.row + r) * blocks + b;
      float32x4_t term = vmulq_f32(vmulq_n_f32(scales, in.q8_scale[block]), vcvtq_f32_s32(sums));
      if constexpr (Affine) term = vaddq_f32(term, vmulq_n_f32(mins, in.q8_scaled_sum[block]));
      acc[r] = vaddq_f32(acc[r], term);
    }
  }
  for (int r = 0; r < R; ++r) {
    float lanes[kQuantOutputs];
    vst1q_f32(lanes, acc[r]);
    std::memcpy(t.out + r * t.out_stride, lanes, t.outputs * sizeof(float));
  }
}

template <bool Affine, int R>
KIPP_FLATTEN void quant_tile(const QuantTile& t) {
  quant_tile_body<WideningStep, Affine, R>(t);
}

#if KIPP_HAS_SDOT
template <bool Affine, int R>
KIPP_DOTPROD KIPP_FLATTEN void quant_tile_dot(const QuantTile& t) {
  quant_tile_body<DotStep, Affine, R>(t);
}
#endif

using QuantTileFn = void (*)(const QuantTile&);

template <bool Affine, bool Dot, size_t... R>
constexpr std::array<QuantTileFn, kQuantRows> quant_tiles(std::index_sequence<R...>) {
#if KIPP_HAS_SDOT
  if constexpr (Dot) return {&quant_tile_dot<Affine, static_cast<int>(R) + 1>...};
#endif
  return {&quant_tile<Affine, static_cast<int>(R) + 1>...};
}

template <bool Affine>
void quantized_matmul(bool dot, const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  static constexpr auto widened = quant_tiles<Affine, false>(std::make_index_sequence<kQuantRows>());
  static constexpr auto dotted = quant_tiles<Affine, true>(std::make_index_sequence<kQuantRows>());
  const auto& tiles = dot ? dotted : widened;
  // Output blocks stay in cache while every row tile passes over them.
  const size_t per_block = in.rows > kQuantRows ? kPrefillOutputsPerBlock : kOutputsPerBlock;
  for (size_t block = 0; block < w.rows; block += per_block) {
    const size_t block_end = std::min(w.rows, block + per_block);
    for (size_t row = 0; row < in.rows; row += kQuantRows) {
      const size_t rows = std::min(kQuantRows, in.rows - row);
      for (size_t o = block; o < block_end; o += kQuantOutputs) {
        QuantTile tile{&in, row, {}, std::min(kQuantOutputs, block_end - o), out + row * out_stride + o, out_stride};
        for (size_t c = 0; c < kQuantOutputs; ++c) tile.rows[c] = w.data + std::min(o + c, block_end - 1) * w.row_bytes;
        tiles[rows - 1](tile);
      }
    }
  }
}

Features detect_features() {
  Features features;
#if defined(__linux__)
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  features.dotprod = KIPP_HAS_SDOT && (hwcap & HWCAP_ASIMDDP) != 0;
  features.bf16 = KIPP_HAS_BFDOT && (hwcap2 & HWCAP2_BF16) != 0;
#elif defined(__APPLE__)
  const auto has = [](const char* name) {
    int value = 0;
    size_t size = sizeof value;
    return sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value != 0;
  };
  features.dotprod = KIPP_HAS_SDOT && has("hw.optional.arm.FEAT_DotProd");
  features.bf16 = KIPP_HAS_BFDOT && has("hw.optional.arm.FEAT_BF16");
#endif
  return features;
}

}  // namespace

const Features& cpu_features() {
  static const Features features = detect_features();
  return features;
}

void matmul_with(const Features& features, const WeightMatrix& w, const PreparedInput& in, float* out,
                 size_t out_stride) {
  if (w.type == GgmlType::BF16 && in.format == InputFormat::BF16)
    return bf16_matmul(features.bf16, w, in, out, out_stride);
  if (w.type == GgmlType::Q8_0 && in.format == InputFormat::Q8)
    return quantized_matmul<false>(features.dotprod, w, in, out, out_stride);
  if (w.type == GgmlType::Q4_1 && in.format == InputFormat::Q8)
    return quantized_matmul<true>(features.dotprod, w, in, out, out_stride);
  ref::matmul(w, in, out, out_stride);
}

void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  matmul_with(cpu_features(), w, in, out, out_stride);
}

}  // namespace kipp::kernels::neon
