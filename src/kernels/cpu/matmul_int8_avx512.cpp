#include "kernels/cpu/matmul_int8_avx512.h"

// GCC 12 reports its own _mm512_castsi256_si512 (an intentionally undefined upper half) as
// "used uninitialized" once inlined; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning group; clang warns about the unknown name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "format/quant.h"
#include "kernels/cpu/quant_block_step.h"

#define KIPP_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c,fma")))

namespace kipp::kernels::avx512 {
namespace {

// Panels multiplied side by side.
constexpr size_t kMaxPanels = 2;
// How far ahead products fetch stored panels, into L2 (into L1 the requests would hold the miss
// buffers): the hardware prefetchers alone fall behind the stream. What counts is the distance
// in bytes, a few KiB, hence more of the smaller affine4 blocks; bench/kernel_bench shows it.
constexpr size_t fetch_ahead_blocks(bool affine) { return affine ? 16 : 8; }
// 32-bit groups of codes per 32-element block.
constexpr int kGroups = 8;

// One panel of up to 16 weight rows, rearranged for VPDPBUSD with the input broadcast: vector
// g of block b holds, in lane j, codes 4g..4g+3 of block b of output j as unsigned bytes
// (Q8_0 codes + 128; affine4 codes as they are). Lanes past the matrix's last row hold codes
// that stand for zero and zero scales.
struct alignas(64) Vector {
  unsigned char bytes[64];
};
struct Panel {
  std::vector<Vector> codes;   // blocks * kGroups
  std::vector<Vector> scales;  // blocks: the weight scales d of the 16 outputs, FP32
  std::vector<Vector> mins;    // blocks (affine4): the weight minimums, FP32
};

struct Layout {
  size_t block_bytes;
  size_t codes_offset;  // of the codes within a block
};

constexpr Layout layout(bool affine) {
  return affine ? Layout{sizeof(BlockAffine4), offsetof(BlockAffine4, nibbles)}
                : Layout{sizeof(BlockQ8_0), offsetof(BlockQ8_0, q)};
}

// The 32 codes of one block of one weight row as bytes in input order, in a 256-bit half.
KIPP_AVX512 inline __m512i codes_pair(const uint8_t* low_row, const uint8_t* high_row, bool affine) {
  if (!affine) {
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(low_row));
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(high_row));
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1),
                            _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  // Byte i holds code i (low nibble) and code i + 16 (high nibble): each row's 16 bytes go to two
  // 128-bit lanes, shifted by 0 and 4.
  const __m512i spread =
      _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(low_row))),
                                  0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(high_row)));
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  return _mm512_mask_blend_epi64(0xCC, _mm512_and_si512(spread, nibble),
                                 _mm512_and_si512(_mm512_srli_epi16(spread, 4), nibble));
}

// z[j] holds rows (j < 4 ? j : j + 4) and that + 4 in its halves; out[g] gets dword g of every
// row, row j in lane j (an 8x8 dword transpose in each half, then the halves interleaved).
KIPP_AVX512 inline void transpose_rows(const __m512i (&z)[8], Vector* out) {
  __m512i t[8], u[8];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(z[2 * k], z[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(z[2 * k], z[2 * k + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
#pragma GCC unroll 4
  for (int d = 0; d < 4; ++d) {
    _mm512_store_si512(out + d, _mm512_shuffle_i32x4(u[d], u[d + 4], _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_store_si512(out + d + 4, _mm512_shuffle_i32x4(u[d], u[d + 4], _MM_SHUFFLE(3, 1, 3, 1)));
  }
}

// Packs weight rows [first, first + count) of w, count <= 16.
KIPP_AVX512 void pack_panel(const WeightMatrix& w, size_t first, size_t count, bool affine, Panel& panel) {
  static const uint8_t kZeroBlock[sizeof(BlockQ8_0)] = {};
  const Layout shape = layout(affine);
  const size_t blocks = w.cols / 32;
  const uint8_t* rows[kPanelRows];
  for (size_t j = 0; j < kPanelRows; ++j) rows[j] = j < count ? w.data + (first + j) * w.row_bytes : nullptr;
  const __mmask16 present = static_cast<__mmask16>((1u << count) - 1);
  const __m512i row_offsets = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                 _mm512_set1_epi32(static_cast<int>(w.row_bytes)));
  const size_t ahead = std::min(w.rows, first + kMaxPanels * kPanelRows);
  const uint8_t* next = w.data + ahead * w.row_bytes;
  const uint8_t* next_end = w.data + std::min(w.rows, ahead + kPanelRows) * w.row_bytes;
  const size_t step = kPanelRows * shape.block_bytes;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t at = b * shape.block_bytes;
    const auto codes = [&](size_t j) { return rows[j] != nullptr ? rows[j] + at + shape.codes_offset : kZeroBlock; };
    // The panel's rows are one contiguous range, read here as 16 interleaved streams, which the
    // hardware prefetchers do not follow: the panel in the same place of the next pair is
    // fetched ahead as one sequential range, a block's share of it per block, into L2 (into L1
    // it would evict the panel being built). A whole pair's packing and products hide its
    // latency, where the very next panel would arrive too late.
    for (const uint8_t* line = next + b * step; line < next + (b + 1) * step && line < next_end; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
    __m512i z[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const size_t low = j < 4 ? j : j + 4;
      z[j] = codes_pair(codes(low), codes(low + 4), affine);
    }
    transpose_rows(z, panel.codes.data() + b * kGroups);
    // The first 32 bits of each block: the scale (and for affine4 the minimum above it).
    const __m512i heads =
        _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), present, row_offsets, w.data + first * w.row_bytes + at, 1);
    _mm512_store_ps(panel.scales.data() + b, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(heads)));
    if (affine)
      _mm512_store_ps(panel.mins.data() + b, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(heads, 16))));
  }
}

// sums + VPDPBUSD(codes, the 4 input codes at x in every lane), the input broadcast from memory
// ({1to16}) inside the product. Written out because GCC emits a separate VPBROADCASTD when one
// broadcast feeds two products, and those compete with the products for the vector pipes
// (bench/kernel_bench, 8 rows, shows the difference).
KIPP_AVX512 inline __m512i dot_group(__m512i sums, __m512i codes, const int8_t* x) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(sums) : "v"(codes), "m"(*reinterpret_cast<const int32_t*>(x)));
  return sums;
}

// The input as the tiles read it: a tile of R rows finds, per block, one record of its rows'
// 32 codes, then their scales d, the start of their integer sums (Q8_0: -128 x code sum) and
// (affine4) d x code sum, all at one pointer plus constants. Read from the prepared rows (a row
// apart, a stride known only at run time), GCC kept an 8-row tile's addresses in vector
// registers and on the stack, moved back for every broadcast: those moves run on the vector
// pipes and hold the tile well below the VNNI peak (bench/kernel_bench with a small --mib).
struct RecordLayout {
  size_t rows;
  constexpr size_t scales() const { return 32 * rows; }
  constexpr size_t starts() const { return scales() + 4 * rows; }
  constexpr size_t scaled_sums() const { return starts() + 4 * rows; }
  constexpr size_t bytes() const { return scaled_sums() + 4 * rows; }
};
constexpr size_t kRecordBytesPerRow = RecordLayout{1}.bytes();

// Every row of `in` as records, the rows split into tiles of at most `most`: the tile from row
// `row` keeps its blocks' records from row * blocks * kRecordBytesPerRow on.
class InputRecords {
 public:
  const uint8_t* fill(const PreparedInput& in, size_t most) {
    const size_t blocks = in.cols / 32;
    if (bytes_.size() < in.rows * blocks * kRecordBytesPerRow) bytes_.resize(in.rows * blocks * kRecordBytesPerRow);
    const size_t tiles = (in.rows + most - 1) / most;
    for (size_t t = 0, row = 0; t < tiles; ++t) {
      const size_t rows = tile_end(in.rows, tiles, t) - row;
      uint8_t* tile = bytes_.data() + row * blocks * kRecordBytesPerRow;
      const RecordLayout layout{rows};
      for (size_t r = 0; r < rows; ++r)
        for (size_t b = 0; b < blocks; ++b) {
          uint8_t* at = tile + b * layout.bytes();
          const size_t block = (row + r) * blocks + b;
          const int32_t start = -128 * in.q8_sum[block];
          std::memcpy(at + 32 * r, in.q8 + (row + r) * in.cols + b * 32, 32);
          std::memcpy(at + layout.scales() + 4 * r, &in.q8_scale[block], 4);
          std::memcpy(at + layout.starts() + 4 * r, &start, 4);
          std::memcpy(at + layout.scaled_sums() + 4 * r, &in.q8_scaled_sum[block], 4);
        }
      row += rows;
    }
    return bytes_.data();
  }
  // The end of tile t of `tiles` over `rows` rows: as few tiles as fit, of sizes differing by at
  // most one.
  static size_t tile_end(size_t rows, size_t tiles, size_t t) { return rows * (t + 1) / tiles; }

 private:
  std::vector<uint8_t> bytes_;
};

// Panels built by pack_panel for this call, in a thread's buffers.
struct BuiltPanels {
  const Panel* panels;
  KIPP_AVX512 __m512 scales(int p, size_t b) const { return _mm512_load_ps(panels[p].scales.data() + b); }
  KIPP_AVX512 __m512 mins(int p, size_t b) const { return _mm512_load_ps(panels[p].mins.data() + b); }
  KIPP_AVX512 __m512i codes(int p, size_t b, int g) const {
    return _mm512_load_si512(panels[p].codes.data() + b * kGroups + g);
  }
  void fetch_ahead(int, size_t) const {}
};

// What a tile over stored panels fetches as it goes: the same panels further on (the tile that
// reads them from memory), or, line for line, the panels after them (the tiles after it, which
// find these in cache: memory then keeps streaming while they compute). Batches and short
// prefills gain from it in `kipp bench`.
enum class PanelFetch { kAhead, kNextPanels };

// Panels stored in the weights by pack_quantized_panels (StoredPanelBlock).
template <bool Affine, PanelFetch Fetch = PanelFetch::kAhead>
struct StoredPanels {
  static constexpr size_t kBlockBytes = stored_panel_block(Affine).bytes;  // one block of a whole panel
  const uint8_t* first;                                                    // block 0 of panel 0
  size_t panel_bytes;
  int side_by_side;  // panels multiplied together: the next ones start that many panels on
  const uint8_t* at(int p, size_t b) const { return first + static_cast<size_t>(p) * panel_bytes + b * kBlockBytes; }
  KIPP_AVX512 __m512 scales(int p, size_t b) const {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at(p, b))));
  }
  KIPP_AVX512 __m512 mins(int p, size_t b) const {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at(p, b) + 32)));
  }
  KIPP_AVX512 void fetch_ahead(int p, size_t b) const {
    const uint8_t* block =
        Fetch == PanelFetch::kAhead ? at(p, b + fetch_ahead_blocks(Affine)) : at(p + side_by_side, b);
    // Unrolled over a constant size: as a loop it took the 8-row tile's spare general registers
    // and spilled to the stack every block.
#pragma GCC unroll 9
    for (size_t line = 0; line < kBlockBytes; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(block + line), _MM_HINT_T1);
  }
  KIPP_AVX512 __m512i codes(int p, size_t b, int g) const {
    constexpr size_t codes = stored_panel_block(Affine).codes_offset;
    if constexpr (!Affine) return _mm512_loadu_si512(at(p, b) + codes + 64 * g);
    const __m512i nibbles = _mm512_loadu_si512(at(p, b) + codes + 64 * (g % 4));
    return _mm512_and_si512(g < 4 ? nibbles : _mm512_srli_epi16(nibbles, 4), _mm512_set1_epi8(0x0F));
  }
};

// R input rows (their records from `records` on) times P panels side by side (each input
// broadcast serves them all), into out (row r at out + r * out_stride, panel p's outputs from
// 16 * p on, in store[p]'s lanes). Each lane computes the reference's sequence exactly: the
// integer sum of a block, then sum += (d_w * d_x) * float(block sum) [+ min * scaled code sum],
// blocks in order.
template <int R, int P, bool Affine, typename Source>
KIPP_AVX512 void panel_rows(const Source& panels, const uint8_t* records, size_t blocks, float* out, size_t out_stride,
                            const __mmask16* store) {
  constexpr RecordLayout kLayout{static_cast<size_t>(R)};
  __m512 acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* record = records + b * kLayout.bytes();
    const auto input_float = [&](size_t offset, int r) {
      float value;
      std::memcpy(&value, record + offset + 4 * r, 4);
      return value;
    };
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) panels.fetch_ahead(p, b);
    __m512i sums[R][P];
    // Q8_0 codes carry +128: starting at -128 * (input code sum) takes it off again.
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      int32_t start = 0;
      if constexpr (!Affine) std::memcpy(&start, record + kLayout.starts() + 4 * r, 4);
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) sums[r][p] = _mm512_set1_epi32(start);
    }
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) {
      __m512i w[P];
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) w[p] = panels.codes(p, b, g);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int8_t* x = reinterpret_cast<const int8_t*>(record + 32 * r + 4 * g);
#pragma GCC unroll 2
        for (int p = 0; p < P; ++p) sums[r][p] = dot_group(sums[r][p], w[p], x);
      }
    }
    __m512 scales[P], mins[P];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
      scales[p] = panels.scales(p, b);
      mins[p] = Affine ? panels.mins(p, b) : _mm512_setzero_ps();
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float x_scale = input_float(kLayout.scales(), r);
      const float x_scaled_sum = Affine ? input_float(kLayout.scaled_sums(), r) : 0.0f;
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p)
        acc[r][p] = cpu::add_block<Affine>(acc[r][p], scales[p], mins[p], sums[r][p], x_scale, x_scaled_sum);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) _mm512_mask_storeu_ps(out + r * out_stride + kPanelRows * p, store[p], acc[r][p]);
}

// Rows per tile for P panels: accumulators (an integer and a float one per row and panel), the
// panels' code vectors and the broadcast input fit the 32 vector registers. For prefill, two
// panels x 6 rows beat one panel x 8 rows: each broadcast serves two products.
constexpr int tile_rows(int panels) { return panels == 1 ? 8 : 6; }

template <bool Affine, typename Source>
struct PanelRowsTables {
  using Fn = void (*)(const Source&, const uint8_t*, size_t, float*, size_t, const __mmask16*);
  template <int P, size_t... R>
  static constexpr std::array<Fn, sizeof...(R)> table(std::index_sequence<R...>) {
    return {&panel_rows<static_cast<int>(R) + 1, P, Affine, Source>...};
  }
  static constexpr auto one = table<1>(std::make_index_sequence<tile_rows(1)>());
  static constexpr auto two = table<2>(std::make_index_sequence<tile_rows(2)>());
};

// Every input row (as InputRecords filled them, in tiles of at most `most` rows) times `count`
// panels: the first tile reads them through `panels`, the others through `again` (the same
// panels, fetching differently).
template <bool Affine, typename Source, typename Again>
void multiply_panels(const Source& panels, const Again& again, int count, const PreparedInput& in,
                     const uint8_t* records, size_t most, float* out, size_t out_stride, const __mmask16* store) {
  const size_t blocks = in.cols / 32, tiles = (in.rows + most - 1) / most;
  const auto run = [&]<typename Panels>(const Panels& source, size_t row, size_t rows) {
    using Tables = PanelRowsTables<Affine, Panels>;
    (count == 1 ? Tables::one.data() : Tables::two.data())[rows - 1](
        source, records + row * blocks * kRecordBytesPerRow, blocks, out + row * out_stride, out_stride, store);
  };
  for (size_t t = 0, row = 0; t < tiles; ++t) {
    const size_t rows = InputRecords::tile_end(in.rows, tiles, t) - row;
    if (t == 0)
      run(panels, row, rows);
    else
      run(again, row, rows);
    row += rows;
  }
}

template <bool Affine>
void quantized_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  // Up to 8 rows (decoding, batched or not) go in a single tile; more (prefill) in tiles of up to
  // 6, which two panels side by side serve.
  const bool streaming = in.rows <= static_cast<size_t>(tile_rows(1));
  thread_local InputRecords input_records;
  const size_t most = static_cast<size_t>(streaming ? tile_rows(1) : tile_rows(2));
  const uint8_t* records = input_records.fill(in, most);
  if (w.panels) {
    const __mmask16 store[kMaxPanels] = {0xFFFF, 0xFFFF};
    // The single tile takes one panel at a time: every panel is read from memory once, as one
    // sequential stream, and no second tile re-reads it from L2. Two panels side by side (two
    // streams) are slower for one or two rows (bench/kernel_bench).
    const size_t side_by_side = streaming ? 1 : kMaxPanels;
    for (size_t first = 0; first < w.rows; first += side_by_side * kPanelRows) {
      const int count = first + side_by_side * kPanelRows <= w.rows ? static_cast<int>(side_by_side) : 1;
      const uint8_t* data = w.data + first * w.row_bytes;
      const size_t panel_bytes = kPanelRows * w.row_bytes;
      multiply_panels<Affine>(StoredPanels<Affine>{data, panel_bytes, count},
                              StoredPanels<Affine, PanelFetch::kNextPanels>{data, panel_bytes, count}, count, in,
                              records, most, out + first, out_stride, store);
    }
    return;
  }
  // Each thread's panels are sized once for the widest matrix it meets.
  thread_local Panel panels[kMaxPanels];
  const size_t blocks = w.cols / 32;
  for (Panel& panel : panels)
    if (panel.scales.size() < blocks) {
      panel.codes.resize(blocks * kGroups);
      panel.scales.resize(blocks);
      panel.mins.resize(blocks);
    }
  for (size_t first = 0; first < w.rows; first += kMaxPanels * kPanelRows) {
    __mmask16 store[kMaxPanels] = {};
    int count = 0;
    for (; count < static_cast<int>(kMaxPanels) && first + count * kPanelRows < w.rows; ++count) {
      const size_t start = first + count * kPanelRows, outputs = std::min(kPanelRows, w.rows - start);
      pack_panel(w, start, outputs, Affine, panels[count]);
      store[count] = static_cast<__mmask16>((1u << outputs) - 1);
    }
    if (!streaming) {
      multiply_panels<Affine>(BuiltPanels{panels}, BuiltPanels{panels}, count, in, records, most, out + first,
                              out_stride, store);
      continue;
    }
    // The single tile of up to 8 rows is too tall for two panels at once.
    for (int p = 0; p < count; ++p)
      multiply_panels<Affine>(BuiltPanels{panels + p}, BuiltPanels{panels + p}, 1, in, records, most,
                              out + first + p * kPanelRows, out_stride, store + p);
  }
}

}  // namespace

void quantized_matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  return w.type == GgmlType::Q4_1 ? quantized_matmul<true>(w, in, out, out_stride)
                                  : quantized_matmul<false>(w, in, out, out_stride);
}

}  // namespace kipp::kernels::avx512
