#include "kernels/cpu/matmul_amx.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/bf16_panels.h"
#include "kernels/cpu/matmul_avx512.h"
#include "kernels/cpu/matmul_int8_amx.h"
#include "kernels/cpu/matmul_int8_avx512.h"

#define KIPP_AMX __attribute__((target("amx-tile,amx-bf16,sse")))

namespace kipp::kernels::amx {
namespace {

constexpr size_t kBlockColumns = 32;  // BF16 columns per tile product
static_assert(kTileBytes == kBf16TileBytes && kTileRows == kBf16PanelRows && kBlockColumns == kBf16BlockColumns,
              "the weight tiles are the BF16 panels' tiles");
// Output panels per pass over the input rows: 128 outputs x up to 3072 columns of weights stay
// in L2 while every row tile streams past them, so the weights are read from memory once.
constexpr size_t kPanelsPerPass = 8;
// How many blocks ahead one-group products (decoding) fetch the weight tiles into L2: without
// fetching the stream falls behind, and a longer distance does not help (bench/kernel_bench
// with one row compares distances).
constexpr size_t kFetchAheadBlocks = 4;

// Linux's arch_prctl request for the AMX tile data state (asm/prctl.h, XFEATURE_XTILEDATA).
constexpr int kRequestPermission = 0x1023;
constexpr int kTileDataFeature = 18;

// The tile registers (uniform_tile_config): C0..C3 16 x 16 FP32 accumulators (C0, C1: input
// rows 0-15 x two output panels; C2, C3: rows 16-31), A4, A5 16 rows x 32 BF16 inputs, B6, B7 16
// column pairs x 16 outputs of weights.

// A tile product's operands: up to two groups of 16 input rows and two panels of 16 outputs.
struct Operands {
  const uint16_t* rows[2];  // each group's first row, column 0
  size_t row_stride_bytes[2];
  size_t block_elements;      // from one block of a group's inputs to the next
  const uint16_t* panels[2];  // each panel's first tile
  float* out[2][2];           // [group][panel]: where the 16 x 16 results go
  size_t out_stride_bytes[2];
  size_t blocks;
};

template <bool TwoGroups, bool TwoPanels>
KIPP_AMX void tile_products(const Operands& op) {
  _tile_zero(0);
  if constexpr (TwoPanels) _tile_zero(1);
  if constexpr (TwoGroups) _tile_zero(2);
  if constexpr (TwoGroups && TwoPanels) _tile_zero(3);
  for (size_t b = 0; b < op.blocks; ++b) {
    // One group of rows (decoding) streams the weights from memory: fetch them ahead into L2.
    if constexpr (!TwoGroups)
      if (b + kFetchAheadBlocks < op.blocks)
        for (size_t i = 0; i < (TwoPanels ? 2 : 1); ++i)
#pragma GCC unroll 16
          for (size_t line = 0; line < kTileBytes / 64; ++line)
            _mm_prefetch(
                reinterpret_cast<const char*>(op.panels[i] + (b + kFetchAheadBlocks) * (kTileBytes / 2)) + line * 64,
                _MM_HINT_T1);
    _tile_loadd(4, op.rows[0] + b * op.block_elements, op.row_stride_bytes[0]);
    if constexpr (TwoGroups) _tile_loadd(5, op.rows[1] + b * op.block_elements, op.row_stride_bytes[1]);
    _tile_loadd(6, op.panels[0] + b * (kTileBytes / 2), 64);
    if constexpr (TwoPanels) _tile_loadd(7, op.panels[1] + b * (kTileBytes / 2), 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (TwoPanels) _tile_dpbf16ps(1, 4, 7);
    if constexpr (TwoGroups) _tile_dpbf16ps(2, 5, 6);
    if constexpr (TwoGroups && TwoPanels) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, op.out[0][0], op.out_stride_bytes[0]);
  if constexpr (TwoPanels) _tile_stored(1, op.out[0][1], op.out_stride_bytes[0]);
  if constexpr (TwoGroups) _tile_stored(2, op.out[1][0], op.out_stride_bytes[1]);
  if constexpr (TwoGroups && TwoPanels) _tile_stored(3, op.out[1][1], op.out_stride_bytes[1]);
  memory_barrier();
}

using TileProducts = void (*)(const Operands&);
constexpr TileProducts kTileProducts[2][2] = {{&tile_products<false, false>, &tile_products<false, true>},
                                              {&tile_products<true, false>, &tile_products<true, true>}};

// A group of fewer than 16 input rows is multiplied as 16 and only its own rows' results are
// kept. A tile row's results depend on that row's inputs alone (and tile products raise no
// floating-point exceptions), so the other rows may hold whatever earlier calls left there: a
// decoding step copies its one row, and each row's results are the same bits whatever shares
// its tile.
class PartialGroup {
 public:
  // The group's first row; rows are row_stride() elements apart.
  const uint16_t* fill(const uint16_t* rows, size_t count, size_t cols) {
    if (cols > stride_) {
      stride_ = cols;
      inputs_.assign(kTileRows * stride_, 0);
    }
    for (size_t r = 0; r < count; ++r) std::copy_n(rows + r * cols, cols, inputs_.begin() + r * stride_);
    return inputs_.data();
  }
  size_t row_stride() const { return stride_; }
  float results[2][kTileRows * kTileRows];

 private:
  std::vector<uint16_t> inputs_;  // 16 rows of stride_ elements
  size_t stride_ = 0;
};

// Many input rows (prefill) are copied once per product into whole tiles, [group][block][16 rows
// x 32 columns]: each tile then loads 1 KiB in sequence instead of 16 rows a row apart.
class InputTiles {
 public:
  const uint16_t* fill(const PreparedInput& in) {
    const size_t groups = (in.rows + kTileRows - 1) / kTileRows, blocks = in.cols / kBlockColumns;
    if (tiles_.size() < groups * blocks * kTileBytes / 2) tiles_.resize(groups * blocks * kTileBytes / 2);
    for (size_t r = 0; r < in.rows; ++r)
      for (size_t b = 0; b < blocks; ++b)
        std::copy_n(
            in.bf16 + r * in.cols + b * kBlockColumns, kBlockColumns,
            tiles_.begin() + ((r / kTileRows) * blocks + b) * (kTileBytes / 2) + (r % kTileRows) * kBlockColumns);
    return tiles_.data();
  }

 private:
  std::vector<uint16_t> tiles_;
};

KIPP_AMX void packed_bf16_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  static constexpr TileConfig kConfig = uniform_tile_config();
  thread_local PartialGroup partial;
  thread_local InputTiles input_tiles;
  const size_t cols = in.cols, blocks = cols / kBlockColumns, panels = w.rows / kTileRows;
  const size_t panel_elements = kTileRows * cols;
  const auto* weights = reinterpret_cast<const uint16_t*>(w.data);
  const uint16_t* tiles = in.rows > 2 * kTileRows ? input_tiles.fill(in) : nullptr;
  memory_barrier();
  _tile_loadconfig(&kConfig);
  for (size_t pass = 0; pass < panels; pass += kPanelsPerPass) {
    const size_t pass_end = std::min(panels, pass + kPanelsPerPass);
    for (size_t row = 0; row < in.rows; row += 2 * kTileRows) {
      Operands op{};
      op.blocks = blocks;
      op.block_elements = tiles != nullptr ? kTileBytes / 2 : kBlockColumns;
      const size_t groups = in.rows - row > kTileRows ? 2 : 1;
      size_t partial_group = 2;  // none
      for (size_t g = 0; g < groups; ++g) {
        const size_t first = row + g * kTileRows, count = std::min(kTileRows, in.rows - first);
        if (tiles != nullptr) {
          op.rows[g] = tiles + (first / kTileRows) * blocks * (kTileBytes / 2);
          op.row_stride_bytes[g] = kBlockColumns * sizeof(uint16_t);
        } else if (count == kTileRows) {
          op.rows[g] = in.bf16 + first * cols;
          op.row_stride_bytes[g] = cols * sizeof(uint16_t);
        } else {
          op.rows[g] = partial.fill(in.bf16 + first * cols, count, cols);
          op.row_stride_bytes[g] = partial.row_stride() * sizeof(uint16_t);
        }
        if (count == kTileRows) {
          op.out_stride_bytes[g] = out_stride * sizeof(float);
          continue;
        }
        partial_group = g;
        op.out_stride_bytes[g] = kTileRows * sizeof(float);
      }
      memory_barrier();
      for (size_t p = pass; p < pass_end; p += 2) {
        const size_t panel_count = std::min<size_t>(2, pass_end - p);
        for (size_t i = 0; i < panel_count; ++i) {
          op.panels[i] = weights + (p + i) * panel_elements;
          for (size_t g = 0; g < groups; ++g)
            op.out[g][i] = g == partial_group ? partial.results[i]
                                              : out + (row + g * kTileRows) * out_stride + (p + i) * kTileRows;
        }
        kTileProducts[groups - 1][panel_count - 1](op);
        if (partial_group < groups) {
          const size_t first = row + partial_group * kTileRows, count = in.rows - first;
          for (size_t i = 0; i < panel_count; ++i)
            for (size_t r = 0; r < count; ++r)
              std::memcpy(out + (first + r) * out_stride + (p + i) * kTileRows, partial.results[i] + r * kTileRows,
                          kTileRows * sizeof(float));
        }
      }
    }
  }
  _tile_release();
}

bool cpu_has_amx_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24;
  return (edx & kAmxBf16) != 0 && (edx & kAmxTile) != 0;
}

}  // namespace

bool supported() {
  static const bool usable =
      avx512::supported() && cpu_has_amx_bf16() && syscall(SYS_arch_prctl, kRequestPermission, kTileDataFeature) == 0;
  return usable;
}

void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  if (w.type == GgmlType::BF16 && w.panels) return packed_bf16_matmul(w, in, out, out_stride);
  if (w.panels && avx512::stores_panels(w) && int8_tiles_for_rows(in.rows))
    return quantized_panels_matmul(w, in, out, out_stride);
  avx512::matmul(w, in, out, out_stride);
}

}  // namespace kipp::kernels::amx
