// The order in which products over BF16 panels (bf16_panels.h) walk rows and panels, shared by
// the AVX-512 and AVX2 tables: each supplies tile functions (R input rows times P panels) and the
// limits its registers and caches set; the walk decides which tiles run where. Decoding's few
// rows stream every panel once from memory, fetching ahead; a few dozen rows go panel by panel,
// the row tiles after the first finding the panel in L2; prefill's rows stream past passes of
// panels that stay in L2.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/bf16_panels.h"
#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::kernels {

// R input rows of block-major `x` (row r's block b at x + b * block_stride + 32 * r) times P
// panels from `panel` (`panel_bytes` apart), into out (row r at out + r * out_stride, panel p's
// 16 outputs from 16 * p).
template <class Element>
using Bf16PanelTileFn = void (*)(const uint8_t* panel, size_t panel_bytes, size_t blocks, const Element* x,
                                 size_t block_stride, float* out, size_t out_stride);

// A tile's Ahead argument that fetches the same lines of the panels after its own: the row tiles
// after the first over a group of panels do, so that memory keeps streaming while they compute
// on cached weights.
inline constexpr size_t kFetchNextPanel = ~size_t{0};

// Fetches the line `ahead` bytes past `at` into L2, not L1: requests into L1 hold its few miss
// buffers and stall the loads. Past a panel's end that is the next panel, which the next tile
// reads; past the last panel of a buffer it is nothing, which a prefetch may name (it never
// faults): the address is formed as an integer, since pointer arithmetic beyond the buffer would
// be undefined.
inline void fetch_to_l2(const uint8_t* at, size_t ahead) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(at) + ahead), 0, 2);
}

template <class Element>
struct Bf16PanelShape {
  const Bf16PanelTileFn<Element>* side_by_side;  // [rows - 1]: `panels` panels at once
  const Bf16PanelTileFn<Element>* single;        // [rows - 1]: the panels left over, one at a time
  size_t panels;
};

// What one instruction set brings to the walk. Tiles fetch ahead in their own panels (streaming
// shapes), the same lines of the next panel (rows_fetching_next), or nothing (prefill).
template <class Element>
struct Bf16PanelTiles {
  size_t max_streaming_rows;       // rows that stream every panel once (a batch being decoded)
  size_t max_few_rows;             // rows up to which few_rows applies (one row takes one_row)
  size_t max_panel_by_panel_rows;  // rows that go over `rows.panels` panels at a time, in row tiles
  size_t max_prefill_rows;         // rows per prefill tile
  size_t panels_per_pass;          // prefill panels kept in L2 while every row tile passes them
  Bf16PanelShape<Element> one_row, few_rows, rows, rows_fetching_next, prefill;
};

// The input rows block by block, [block][row][32 columns], as Element (BF16 as prepared, or
// widened to FP32 for tiles that broadcast FP32 values): a tile then finds every value it
// broadcasts at one pointer per block plus a constant. Read a row apart (a stride known only at
// run time), GCC kept the pair addresses of a many-row tile's block on the stack, which held the
// tile below the peak on weights in cache (bench/kernel_bench with a small --mib). Filled once per
// product by each thread.
template <class Element>
class BlockMajorInput {
 public:
  // Returns the rows' block 0; block b is block_stride(in) elements further on.
  const Element* fill(const PreparedInput& in) {
    constexpr bool kBf16 = std::is_same_v<Element, uint16_t>;
    if constexpr (kBf16)
      if (in.rows == 1) return in.bf16;
    const size_t blocks = in.cols / kBf16BlockColumns;
    if (values_.size() < in.rows * in.cols) values_.resize(in.rows * in.cols);
    for (size_t r = 0; r < in.rows; ++r)
      for (size_t b = 0; b < blocks; ++b) {
        Element* to = values_.data() + (b * in.rows + r) * kBf16BlockColumns;
        const uint16_t* from = in.bf16 + r * in.cols + b * kBf16BlockColumns;
        if constexpr (kBf16)
          std::memcpy(to, from, kBf16BlockColumns * sizeof(uint16_t));
        else
          for (size_t i = 0; i < kBf16BlockColumns; ++i) to[i] = bf16_to_f32(from[i]);
      }
    return values_.data();
  }
  static size_t block_stride(const PreparedInput& in) { return in.rows * kBf16BlockColumns; }

 private:
  std::vector<Element> values_;
};

namespace bf16_panel_walk_detail {

// Rows [row, row + rows) of the block-major input times panels [first, end), P at a time while
// P are left.
template <class Element>
void multiply(const WeightMatrix& w, const PreparedInput& in, const Element* input, size_t row, size_t rows,
              size_t first, size_t end, const Bf16PanelShape<Element>& shape, float* out, size_t out_stride) {
  const size_t blocks = in.cols / kBf16BlockColumns, panel_bytes = kBf16PanelRows * w.row_bytes;
  const Element* x = input + row * kBf16BlockColumns;
  for (size_t p = first; p < end;) {
    const bool together = p + shape.panels <= end;
    (together ? shape.side_by_side : shape.single)[rows - 1](w.data + p * panel_bytes, panel_bytes, blocks, x,
                                                             BlockMajorInput<Element>::block_stride(in),
                                                             out + row * out_stride + p * kBf16PanelRows, out_stride);
    p += together ? shape.panels : 1;
  }
}

}  // namespace bf16_panel_walk_detail

// ref::matmul's contract for BF16 weights packed by pack_bf16_panels (w.panels), with `tiles`.
template <class Element>
void walk_bf16_panels(const WeightMatrix& w, const PreparedInput& in, const Bf16PanelTiles<Element>& tiles, float* out,
                      size_t out_stride) {
  using bf16_panel_walk_detail::multiply;
  if (in.rows == 0) return;
  thread_local BlockMajorInput<Element> block_major;
  const Element* input = block_major.fill(in);
  const size_t panels = w.rows / kBf16PanelRows;
  if (in.rows <= tiles.max_streaming_rows) {
    // Every panel read once, from memory: one row takes several panels side by side (one panel
    // alone leaves too few accumulator chains to hide the FMA latency), a few rows fewer.
    const auto& shape = in.rows == 1 ? tiles.one_row : in.rows <= tiles.max_few_rows ? tiles.few_rows : tiles.rows;
    multiply(w, in, input, 0, in.rows, 0, panels, shape, out, out_stride);
    return;
  }
  // The rows split into as few tiles as fit, of sizes differing by at most one.
  const auto tile_end = [&](size_t row_tiles, size_t t) { return in.rows * (t + 1) / row_tiles; };
  if (in.rows <= tiles.max_panel_by_panel_rows) {
    // A few dozen rows: the first row tile over a group of panels reads it from memory, fetching
    // ahead; the others find it in L2 and fetch the next group.
    const size_t row_tiles = (in.rows + tiles.max_streaming_rows - 1) / tiles.max_streaming_rows;
    for (size_t p = 0; p < panels; p += tiles.rows.panels) {
      const size_t end = std::min(panels, p + tiles.rows.panels);
      for (size_t t = 0, row = 0; t < row_tiles; row = tile_end(row_tiles, t++))
        multiply(w, in, input, row, tile_end(row_tiles, t) - row, p, end,
                 t == 0 ? tiles.rows : tiles.rows_fetching_next, out, out_stride);
    }
    return;
  }
  const size_t row_tiles = (in.rows + tiles.max_prefill_rows - 1) / tiles.max_prefill_rows;
  for (size_t pass = 0; pass < panels; pass += tiles.panels_per_pass) {
    const size_t pass_end = std::min(panels, pass + tiles.panels_per_pass);
    for (size_t t = 0, row = 0; t < row_tiles; row = tile_end(row_tiles, t++))
      multiply(w, in, input, row, tile_end(row_tiles, t) - row, pass, pass_end, tiles.prefill, out, out_stride);
  }
}

}  // namespace kipp::kernels
