// Every SIMD kernel table this CPU runs, held to the scalar reference (src/kernels/ref): the
// same prepared inputs, BF16 products within 1e-6 of the sum of absolute terms (the two differ
// only in the order float sums are added), quantized products equal bit for bit, and the
// determinism contract — a row's results do not
// depend on how many rows or which outputs are computed together.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/kernels.h"
#include "unit/helpers/matmul_fixtures.h"

namespace {

using kipp::GgmlType;
using kipp::kernels::KernelTable;
namespace ref = kipp::kernels::ref;

constexpr double kSimdTolerance = 1e-6;

std::vector<const KernelTable*> simd_tables() {
  std::vector<const KernelTable*> tables;
  for (const KernelTable* table : kipp::kernels::available_kernel_tables())
    if (std::string(table->name) != "reference") tables.push_back(table);
  return tables;
}

TEST(KernelTables, ThisMachineRunsASimdTableAndTheDefaultIsTheBest) {
  const std::vector<const KernelTable*> tables = simd_tables();
  ASSERT_FALSE(tables.empty()) << "no SIMD kernel table for this CPU";
  EXPECT_STREQ(kipp::kernels::cpu_kernels().name, kipp::kernels::available_kernel_tables().back()->name);
  EXPECT_EQ(kipp::kernels::find_kernel_table("no-such-table"), nullptr);
}

// The reference multiplies FP32 activations for every weight type (the forward pass the fast
// tables are gated against on whole models); the fast tables round them as matmul_input.h says.
TEST(KernelTables, OnlyTheReferenceMultipliesFp32Activations) {
  for (const KernelTable* table : kipp::kernels::available_kernel_tables())
    for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_1}) {
      SCOPED_TRACE(std::string(table->name) + ", " + std::string(kipp::ggml_type_name(type)));
      EXPECT_EQ(table->input_format(type), std::string(table->name) == "reference" ? kipp::kernels::InputFormat::F32
                                                                                   : kipp::kernels::input_format(type));
    }
}

kipp::kernels::PreparedInput single_row(const kipp::kernels::PreparedInput& in, size_t r) {
  kipp::kernels::PreparedInput row = in;
  row.rows = 1;
  if (in.f32 != nullptr) row.f32 += r * in.f32_stride;
  if (in.bf16 != nullptr) row.bf16 += r * in.cols;
  if (in.q8 != nullptr) {
    row.q8 += r * in.cols;
    row.q8_scale += r * in.cols / 32;
    row.q8_sum += r * in.cols / 32;
    row.q8_scaled_sum += r * in.cols / 32;
  }
  return row;
}

TEST(KernelSimdMatmul, EqualsReferenceForEveryShapeAndIsDeterministic) {
  std::mt19937 rng(97);
  for (const KernelTable* table : simd_tables()) {
    for (GgmlType type : {GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_1}) {
      std::vector<size_t> widths = {32, 64, 96, 1024, 3072};
      if (type == GgmlType::BF16) widths.insert(widths.end(), {8, 40, 200});
      for (size_t cols : widths)
        for (size_t rows : {1, 2, 3, 5, 9, 17})
          for (size_t outputs : {1, 3, 8, 13, 20, 37}) {
            SCOPED_TRACE(std::string(table->name) + " " + std::string(kipp::ggml_type_name(type)) + " cols " +
                         std::to_string(cols) + " rows " + std::to_string(rows) + " outputs " +
                         std::to_string(outputs));
            const auto m = kipp::testing::make_stored_matrix(type, outputs, cols, rng);
            const auto x = kipp::testing::make_prepared_rows(kipp::kernels::input_format(type), rows, cols, cols, rng);
            std::vector<float> expected(rows * outputs), got(rows * outputs);
            ref::matmul(m.w, x.in, expected.data(), outputs);
            table->matmul(m.w, x.in, got.data(), outputs);
            for (size_t r = 0; r < rows; ++r)
              for (size_t o = 0; o < outputs; ++o) {
                const double magnitude = kipp::testing::exact_product(m, x, o, r).magnitude;
                ASSERT_NEAR(got[r * outputs + o], expected[r * outputs + o], kSimdTolerance * magnitude)
                    << "row " << r << " output " << o;
                // Quantized products: exact integer block sums, then the reference's float
                // sequence, so every table gives the reference's bits.
                if (type != GgmlType::BF16) {
                  ASSERT_EQ(std::bit_cast<uint32_t>(got[r * outputs + o]),
                            std::bit_cast<uint32_t>(expected[r * outputs + o]))
                      << "row " << r << " output " << o;
                }
              }
            // Each row alone, and the outputs from 1 on alone, give the same bits.
            for (size_t r = 0; r < rows; ++r) {
              std::vector<float> alone(outputs);
              table->matmul(m.w, single_row(x.in, r), alone.data(), outputs);
              for (size_t o = 0; o < outputs; ++o)
                ASSERT_EQ(std::bit_cast<uint32_t>(alone[o]), std::bit_cast<uint32_t>(got[r * outputs + o]))
                    << "row " << r << " output " << o;
            }
            if (outputs > 1) {
              kipp::kernels::WeightMatrix tail = m.w;
              tail.data += m.w.row_bytes;
              tail.rows -= 1;
              std::vector<float> part(rows * outputs);
              table->matmul(tail, x.in, part.data(), outputs);
              for (size_t r = 0; r < rows; ++r)
                for (size_t o = 1; o < outputs; ++o)
                  ASSERT_EQ(std::bit_cast<uint32_t>(part[r * outputs + o - 1]),
                            std::bit_cast<uint32_t>(got[r * outputs + o]))
                      << "row " << r << " output " << o;
            }
          }
    }
  }
}

// Tables with their own weight layout (KernelTable::pack_weights): packed matrices give the
// reference's products (bit for bit where the stored ones do), each row alone and whole panels
// cut off the front give the same bits, and matrices the table reads as stored are left alone.
// Row counts cover every tile shape (1, 2-3, 4-8, 9-64 panel by panel and 65+ in prefill tiles)
// and whole and partial tiles of 16 and 32 rows, output counts several passes.
TEST(KernelSimdMatmul, PackedWeightsEqualTheReference) {
  std::mt19937 rng(131);
  size_t packed_count = 0;
  for (const KernelTable* table : simd_tables()) {
    if (table->pack_weights == nullptr) continue;
    for (GgmlType type : {GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_1})
      for (size_t cols : {32, 96, 1024})
        for (size_t rows : {1, 2, 3, 7, 8, 9, 13, 16, 33, 40, 70})
          for (size_t outputs : {13, 16, 48, 64, 160}) {
            SCOPED_TRACE(std::string(table->name) + " " + std::string(kipp::ggml_type_name(type)) + " cols " +
                         std::to_string(cols) + " rows " + std::to_string(rows) + " outputs " +
                         std::to_string(outputs));
            const auto m = kipp::testing::make_stored_matrix(type, outputs, cols, rng);
            const auto x = kipp::testing::make_prepared_rows(kipp::kernels::input_format(type), rows, cols, cols, rng);
            std::vector<uint8_t> packed(m.bytes.size(), 0xA5);
            const std::vector<uint8_t> untouched = packed;
            if (!table->pack_weights(m.w, packed.data())) {
              EXPECT_EQ(packed, untouched);
              continue;
            }
            ++packed_count;
            EXPECT_EQ(outputs % 16, 0u);
            {  // packing whole panels piece by piece (as the backend does) gives the same bytes
              std::vector<uint8_t> pieces(m.bytes.size(), 0x5A);
              kipp::kernels::WeightMatrix front = m.w, back = m.w;
              front.rows = 16;
              back.data += 16 * m.w.row_bytes;
              back.rows -= 16;
              EXPECT_TRUE(table->pack_weights(front, pieces.data()));
              if (back.rows > 0) {
                EXPECT_TRUE(table->pack_weights(back, pieces.data() + 16 * m.w.row_bytes));
              }
              ASSERT_EQ(pieces, packed);
            }
            kipp::kernels::WeightMatrix w = m.w;
            w.data = packed.data();
            w.panels = true;
            std::vector<float> expected(rows * outputs), got(rows * outputs, NAN);
            ref::matmul(m.w, x.in, expected.data(), outputs);
            table->matmul(w, x.in, got.data(), outputs);
            for (size_t r = 0; r < rows; ++r)
              for (size_t o = 0; o < outputs; ++o) {
                const size_t i = r * outputs + o;
                if (type == GgmlType::BF16)
                  ASSERT_NEAR(got[i], expected[i], kSimdTolerance * kipp::testing::exact_product(m, x, o, r).magnitude)
                      << "row " << r << " output " << o;
                else
                  ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(expected[i]))
                      << "row " << r << " output " << o;
              }
            for (size_t r = 0; r < rows; ++r) {
              std::vector<float> alone(outputs);
              table->matmul(w, single_row(x.in, r), alone.data(), outputs);
              for (size_t o = 0; o < outputs; ++o)
                ASSERT_EQ(std::bit_cast<uint32_t>(alone[o]), std::bit_cast<uint32_t>(got[r * outputs + o]))
                    << "row " << r << " output " << o << " computed alone";
            }
            if (type == GgmlType::BF16) {  // packed BF16 rows read back as stored (KernelTable::dequantize_row)
              std::vector<float> stored_row(cols), packed_row(cols);
              for (size_t o = 0; o < outputs; ++o) {
                ref::dequantize_row(m.w, o, stored_row.data());
                table->dequantize_row(w, o, packed_row.data());
                ASSERT_EQ(packed_row, stored_row) << "row " << o << " of the packed matrix";
              }
            }
            kipp::kernels::WeightMatrix tail = w;
            tail.data += 16 * w.row_bytes;
            tail.rows -= 16;
            std::vector<float> part(rows * outputs, NAN);
            table->matmul(tail, x.in, part.data() + 16, outputs);
            for (size_t r = 0; r < rows; ++r)
              for (size_t o = 16; o < outputs; ++o)
                ASSERT_EQ(std::bit_cast<uint32_t>(part[r * outputs + o]), std::bit_cast<uint32_t>(got[r * outputs + o]))
                    << "row " << r << " output " << o;
          }
  }
  if (packed_count == 0) GTEST_SKIP() << "no kernel table on this CPU packs weights";
}

}  // namespace

namespace {

// K/V of one sequence in scrambled 32-position blocks: [position][kv_head][head_dim] BF16 for
// K and V of one layer per block.
struct KvBlocks {
  size_t kv_heads, head_dim;
  std::vector<std::vector<uint16_t>> storage;
  std::vector<const uint16_t*> table;

  KvBlocks(size_t kv_heads_, size_t head_dim_, size_t positions, std::mt19937& rng)
      : kv_heads(kv_heads_), head_dim(head_dim_) {
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    const size_t blocks = (positions + 31) / 32;
    storage.resize(blocks);
    for (auto& block : storage) {
      block.resize(2 * 32 * kv_heads * head_dim);
      for (uint16_t& value : block) value = kipp::f32_to_bf16(dist(rng));
    }
    for (size_t b = 0; b < blocks; ++b) table.push_back(storage[(b * 7 + 3) % blocks].data());
  }
  kipp::kernels::KvLayerView view(size_t kv_head) const {
    const size_t width = kv_heads * head_dim;
    return {table.data(), kv_head * head_dim, 32 * width + kv_head * head_dim, 1, head_dim, width};
  }
};

TEST(KernelSimdAttention, RowsEqualReferenceAndDoNotDependOnTheirTile) {
  std::mt19937 rng(131);
  for (const KernelTable* table : simd_tables())
    for (size_t head_dim : {32, 64, 128, 256})
      for (size_t group : {1, 2, 3}) {  // 3: a pair of query heads sharing K/V loads and one alone
        constexpr size_t kKvHeads = 2, kPositions = 100;
        const KvBlocks kv(kKvHeads, head_dim, kPositions, rng);
        const size_t q_stride = kKvHeads * group * head_dim;
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        std::vector<float> q(kPositions * q_stride);
        for (float& v : q) v = dist(rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        std::vector<float> scratch(ref::attention_scratch_floats(kPositions, 40, group, head_dim));
        for (size_t first : {0, 31, 60})
          for (size_t rows : {1, 5, 40}) {
            if (first + rows > kPositions) continue;
            SCOPED_TRACE(std::string(table->name) + " head_dim " + std::to_string(head_dim) + " group " +
                         std::to_string(group) + " first " + std::to_string(first) + " rows " + std::to_string(rows));
            for (size_t g = 0; g < kKvHeads; ++g) {
              const float* queries = q.data() + first * q_stride + g * group * head_dim;
              std::vector<float> expected(rows * q_stride), got(rows * q_stride);
              ref::attention_rows(queries, q_stride, rows, first, group, kv.view(g), scale, scratch.data(),
                                  expected.data(), q_stride);
              table->attention_rows(queries, q_stride, rows, first, group, kv.view(g), scale, scratch.data(),
                                    got.data(), q_stride);
              for (size_t r = 0; r < rows; ++r)
                for (size_t i = 0; i < group * head_dim; ++i)
                  ASSERT_NEAR(got[r * q_stride + i], expected[r * q_stride + i],
                              1e-5)  // outputs are averages of values in [-2, 2]
                      << "row " << r << " element " << i;
              for (size_t r = 0; r < rows; ++r) {
                std::vector<float> alone(q_stride);
                table->attention_rows(queries + r * q_stride, q_stride, 1, first + r, group, kv.view(g), scale,
                                      scratch.data(), alone.data(), q_stride);
                for (size_t i = 0; i < group * head_dim; ++i)
                  ASSERT_EQ(std::bit_cast<uint32_t>(alone[i]), std::bit_cast<uint32_t>(got[r * q_stride + i]))
                      << "row " << r << " element " << i;
              }
            }
          }
      }
}

TEST(KernelSimdElementwise, EqualReference) {
  std::mt19937 rng(137);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (const KernelTable* table : simd_tables()) {
    SCOPED_TRACE(table->name);
    for (size_t n : {1, 7, 64, 1000, 3072}) {
      std::vector<float> x(n), weight(n), up(n);
      for (size_t i = 0; i < n; ++i) x[i] = dist(rng), weight[i] = dist(rng), up[i] = dist(rng);
      std::vector<float> expected(n), got(n);
      ref::rms_norm(x.data(), weight.data(), expected.data(), n, 1e-6f);
      table->rms_norm(x.data(), weight.data(), got.data(), n, 1e-6f);
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], expected[i], 1e-6 * std::fabs(expected[i]) + 1e-7) << i;
      ref::swiglu(x.data(), up.data(), expected.data(), n);
      table->swiglu(x.data(), up.data(), got.data(), n);
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], expected[i], 1e-6 * std::fabs(expected[i]) + 1e-7) << i;
      // Exact operations give the same bits.
      std::vector<uint16_t> bf16_expected(n), bf16_got(n);
      ref::store_bf16(x.data(), bf16_expected.data(), n);
      table->store_bf16(x.data(), bf16_got.data(), n);
      ASSERT_EQ(bf16_expected, bf16_got);
      std::vector<float> sum_expected = x, sum_got = x;
      ref::add(sum_expected.data(), up.data(), n);
      table->add(sum_got.data(), up.data(), n);
      ASSERT_EQ(sum_expected, sum_got);
    }
    for (size_t head_dim : {32, 128}) {
      std::vector<float> cos(head_dim / 2), sin(head_dim / 2), v(4 * head_dim);
      ref::rope_angles(1234, head_dim, 1e6, cos.data(), sin.data());
      for (float& value : v) value = dist(rng);
      std::vector<float> expected = v, got = v;
      ref::rope(expected.data(), 4, head_dim, cos.data(), sin.data());
      table->rope(got.data(), 4, head_dim, cos.data(), sin.data());
      ASSERT_EQ(expected, got);
    }
    // Prepared inputs are bit for bit the reference's, in both formats, also when the rows are
    // prepared in parts (as the backend's threads do).
    for (kipp::kernels::InputFormat format : {kipp::kernels::InputFormat::BF16, kipp::kernels::InputFormat::Q8}) {
      constexpr size_t kRows = 3, kCols = 96, kStride = 100;
      std::vector<float> x(kRows * kStride);
      for (float& value : x) value = dist(rng);
      // Row 1's blocks hold the values where vector code could part from the reference: NaN,
      // infinities, signed zeros, a block of denormals (whose 127 / max overflows), values
      // exactly halfway between codes.
      const float specials[] = {std::nanf(""), -std::nanf(""), INFINITY,       -INFINITY,     0.0f, -0.0f,   1e-39f,
                                -1e-39f,       2.5f / 127.0f,  -0.5f / 127.0f, 1.5f / 127.0f, 1.0f, 3.4e38f, -3.4e38f};
      for (size_t i = 0; i < std::size(specials); ++i) x[kStride + 3 * i] = specials[i];
      for (size_t i = 0; i < 32; ++i) x[kStride + 64 + i] = (i % 2 ? 1e-39f : -2e-39f);
      x[kStride + 32] = 1.0f;
      for (size_t i = 1; i < 32; ++i) x[kStride + 32 + i] = static_cast<float>(i % 5) * 0.5f / 127.0f;
      const size_t bytes = kipp::kernels::prepared_input_bytes(format, kRows, kCols);
      std::vector<uint8_t> expected(bytes), got(bytes);
      ref::prepare_input(format, x.data(), kRows, kStride, kCols, expected.data());
      const kipp::kernels::PreparedInput in =
          kipp::kernels::input_layout(format, x.data(), kRows, kStride, kCols, got.data());
      table->prepare_rows(in, 1, kRows - 1);
      table->prepare_rows(in, 0, 1);
      ASSERT_EQ(expected, got);
    }
  }
}

}  // namespace
