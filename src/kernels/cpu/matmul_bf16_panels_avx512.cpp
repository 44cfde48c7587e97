#include "kernels/cpu/matmul_bf16_panels_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

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
// The row tiles after a panel's first fetch the next panel, line for line, so that memory keeps
// streaming while they compute on cached weights.
constexpr size_t kNextPanel = ~size_t{0};

// Fetches the line `ahead` bytes past `at` into L2, not L1: requests into L1 hold its few miss
// buffers and stall the loads, as with the int8 panels and decode attention. Past a panel's end
// that is the next panel, which the next tile reads; past the last panel of a buffer it is
// nothing, which a prefetch may name (it never faults): the address is formed as an integer,
// since pointer arithmetic beyond the buffer would be undefined.
KIPP_AVX512 inline void fetch_line(const uint8_t* at, size_t ahead) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(at) + ahead), _MM_HINT_T1);
}

// R input rows from x, block-major (BlockMajorInput: row r's block b at x + b * block_stride +
// 32 * r), times P panels from `panel` (`panel_bytes` apart), into out (row r at
// out + r * out_stride, panel p's 16 outputs from 16 * p). With Ahead > 0, the lines Ahead blocks
// further on in each panel are fetched as the tile goes; with kNextPanel, the same lines of the
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
        if constexpr (Ahead == kNextPanel) {
          fetch_line(at, panel_bytes);
          fetch_line(at, panel_bytes + 64);
        } else if constexpr (Ahead > 0) {
          fetch_line(at, Ahead * kBf16TileBytes);
          fetch_line(at, Ahead * kBf16TileBytes + 64);
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

using TileFn = void (*)(const uint8_t*, size_t, size_t, const uint16_t*, size_t, float*, size_t);

// The input rows block by block, [block][row][32 columns]: a tile then finds every pair it
// broadcasts at one pointer per block plus a constant. Read a row apart (a stride known only at
// run time), GCC kept the 128 pair addresses of an 8-row tile's block on the stack, which held
// the tile well below the BF16 peak on weights in cache (bench/kernel_bench with a small --mib).
// One row is block-major as it is. Filled once per product by each thread.
class BlockMajorInput {
 public:
  // Returns the rows' block 0; block b is block_stride(in) elements further on.
  const uint16_t* fill(const PreparedInput& in) {
    if (in.rows == 1) return in.bf16;
    const size_t blocks = in.cols / kBf16BlockColumns;
    if (values_.size() < in.rows * in.cols) values_.resize(in.rows * in.cols);
    for (size_t r = 0; r < in.rows; ++r)
      for (size_t b = 0; b < blocks; ++b)
        std::memcpy(values_.data() + (b * in.rows + r) * kBf16BlockColumns,
                    in.bf16 + r * in.cols + b * kBf16BlockColumns, kBf16BlockColumns * sizeof(uint16_t));
    return values_.data();
  }
  static size_t block_stride(const PreparedInput& in) { return in.rows * kBf16BlockColumns; }

 private:
  std::vector<uint16_t> values_;
};

template <int P, size_t Ahead, size_t... R>
constexpr std::array<TileFn, sizeof...(R)> tiles(std::index_sequence<R...>) {
  return {&panel_tile<static_cast<int>(R) + 1, P, Ahead>...};
}

// Tiles of 1 to N rows times P panels.
template <int P, size_t Ahead, int N>
constexpr std::array<TileFn, N> kTiles = tiles<P, Ahead>(std::make_index_sequence<N>());

struct Shape {
  const TileFn* side_by_side;  // [rows - 1]: P panels at once
  const TileFn* single;        // [rows - 1]: the panels left over, one at a time
  size_t panels;               // P
};

// Rows [row, row + rows) of the block-major input times panels [first, end), P at a time while
// P are left.
void multiply(const WeightMatrix& w, const PreparedInput& in, const uint16_t* input, size_t row, size_t rows,
              size_t first, size_t end, const Shape& shape, float* out, size_t out_stride) {
  const size_t blocks = in.cols / kBf16BlockColumns, panel_bytes = kBf16PanelRows * w.row_bytes;
  const uint16_t* x = input + row * kBf16BlockColumns;
  for (size_t p = first; p < end;) {
    const bool together = p + shape.panels <= end;
    (together ? shape.side_by_side : shape.single)[rows - 1](w.data + p * panel_bytes, panel_bytes, blocks, x,
                                                             BlockMajorInput::block_stride(in),
                                                             out + row * out_stride + p * kBf16PanelRows, out_stride);
    p += together ? shape.panels : 1;
  }
}

}  // namespace

void bf16_panels_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  if (in.rows == 0) return;
  thread_local BlockMajorInput block_major;
  const uint16_t* input = block_major.fill(in);
  const size_t panels = w.rows / kBf16PanelRows;
  // One panel at a time: each weight line is loaded once per row tile and the weights stream in
  // order.
  static constexpr Shape kRows{kTiles<1, kRowsAheadBlocks, kMaxStreamingRows>.data(),
                               kTiles<1, kRowsAheadBlocks, kMaxStreamingRows>.data(), 1};
  if (in.rows <= static_cast<size_t>(kMaxStreamingRows)) {
    // Every panel read once, from memory. One row: 4 panels side by side (8 accumulator chains;
    // one panel alone leaves too few chains to hide the FMA latency). 2-3 rows: 2 panels.
    // More rows: one panel.
    static constexpr Shape kOneRow{kTiles<4, kRowAheadBlocks, 1>.data(), kTiles<1, kRowAheadBlocks, 1>.data(), 4};
    static constexpr Shape kFewRows{kTiles<2, kRowsAheadBlocks, 3>.data(),
                                    kTiles<1, kRowsAheadBlocks, kMaxStreamingRows>.data(), 2};
    const Shape& shape = in.rows == 1 ? kOneRow : in.rows <= 3 ? kFewRows : kRows;
    multiply(w, in, input, 0, in.rows, 0, panels, shape, out, out_stride);
    return;
  }
  // The rows split into as few tiles as fit, of sizes differing by at most one.
  const auto tile_end = [&](size_t tiles, size_t t) { return in.rows * (t + 1) / tiles; };
  if (in.rows <= kMaxPanelByPanelRows) {
    static constexpr Shape kRowsFetchingNext{kTiles<1, kNextPanel, kMaxStreamingRows>.data(),
                                             kTiles<1, kNextPanel, kMaxStreamingRows>.data(), 1};
    const size_t row_tiles = (in.rows + kMaxStreamingRows - 1) / kMaxStreamingRows;
    for (size_t p = 0; p < panels; ++p)
      for (size_t t = 0, row = 0; t < row_tiles; row = tile_end(row_tiles, t++))
        multiply(w, in, input, row, tile_end(row_tiles, t) - row, p, p + 1, t == 0 ? kRows : kRowsFetchingNext, out,
                 out_stride);
    return;
  }
  static constexpr Shape kPrefill{kTiles<2, 0, kMaxPrefillRows>.data(), kTiles<1, 0, kMaxPrefillRows>.data(), 2};
  const size_t row_tiles = (in.rows + kMaxPrefillRows - 1) / kMaxPrefillRows;
  for (size_t pass = 0; pass < panels; pass += kPanelsPerPass) {
    const size_t pass_end = std::min(panels, pass + kPanelsPerPass);
    for (size_t t = 0, row = 0; t < row_tiles; row = tile_end(row_tiles, t++))
      multiply(w, in, input, row, tile_end(row_tiles, t) - row, pass, pass_end, kPrefill, out, out_stride);
  }
}

}  // namespace kipp::kernels::avx512
