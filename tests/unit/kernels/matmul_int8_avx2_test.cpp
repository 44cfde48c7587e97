// The quantized products of the AVX2 and AVX-VNNI tables on packed panels (quant_panels.h), held
// to the scalar reference bit for bit: every decode and prefill tile height (1-13 input rows,
// then many with a partial last tile), several panels, codes at their extremes, and matrices
// that are not whole panels (read as stored). Each table is skipped where the CPU lacks its ISA.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "format/quant.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matmul_avx2.h"
#include "kernels/cpu/matmul_int8_avx2.h"
#include "kernels/cpu/quant_panels.h"
#include "unit/helpers/matmul_fixtures.h"

namespace {

using kipp::GgmlType;
using kipp::kernels::KernelTable;
namespace ref = kipp::kernels::ref;

// The table named `name`, or null when this CPU does not run it.
const KernelTable* table_or_null(const char* name) { return kipp::kernels::find_kernel_table(name); }

#define TABLE_OR_SKIP(table, name, isa)           \
  const KernelTable* table = table_or_null(name); \
  if (table == nullptr) GTEST_SKIP() << "this CPU lacks " isa

// w packed by the table, then its products against ref::matmul on the stored bytes, outputs
// `stride` apart (the gaps must stay untouched).
void expect_packed_equal(const KernelTable& table, const kipp::testing::StoredMatrix& m,
                         const kipp::testing::PreparedRows& x) {
  ASSERT_TRUE(table.packs_weights(m.w));
  std::vector<uint8_t> packed(m.bytes.size());
  ASSERT_TRUE(table.pack_weights(m.w, packed.data()));
  kipp::kernels::WeightMatrix w = m.w;
  w.data = packed.data();
  w.panels = true;
  const size_t rows = x.in.rows, outputs = m.w.rows, stride = outputs + 5;
  std::vector<float> expected(rows * stride, NAN), got(rows * stride, NAN);
  ref::matmul(m.w, x.in, expected.data(), stride);
  table.matmul(w, x.in, got.data(), stride);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t o = 0; o < outputs; ++o)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[r * stride + o]), std::bit_cast<uint32_t>(expected[r * stride + o]))
          << "row " << r << " output " << o;
    for (size_t o = outputs; o < stride; ++o) ASSERT_TRUE(std::isnan(got[r * stride + o])) << "gap after row " << r;
  }
  kipp::kernels::PreparedInput none = x.in;  // no input rows: nothing to write
  none.rows = 0;
  table.matmul(w, none, nullptr, stride);
}

void packed_shapes_equal_reference(const KernelTable& table) {
  std::mt19937 rng(307);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_1})
    for (size_t cols : {32, 96, 1024})
      for (size_t outputs : {16, 48}) {
        const auto m = kipp::testing::make_stored_matrix(type, outputs, cols, rng);
        std::vector<size_t> row_counts;
        for (size_t rows = 1; rows <= 13; ++rows) row_counts.push_back(rows);
        row_counts.insert(row_counts.end(), {64, 67, 511});
        for (size_t rows : row_counts) {
          if (rows > 64 && cols > 96) continue;  // the widest rows at every tile height already
          SCOPED_TRACE(std::string(table.name) + " " + std::string(kipp::ggml_type_name(type)) + " cols " +
                       std::to_string(cols) + " rows " + std::to_string(rows) + " outputs " + std::to_string(outputs));
          const auto x = kipp::testing::make_prepared_rows(kipp::kernels::InputFormat::Q8, rows, cols, cols, rng);
          expect_packed_equal(table, m, x);
        }
      }
}

// Weight codes of the largest magnitude (Q8_0 -128 and 127, affine4 15) against input codes of
// +-127: VPMADDUBSW's 16-bit pair sums come closest to saturating, and affine4's 16-bit sums of
// pairs across a block closest to overflowing.
void packed_extremes_equal_reference(const KernelTable& table) {
  std::mt19937 rng(311);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_1})
    for (size_t rows : {1, 2, 3, 7}) {
      constexpr size_t kCols = 128, kOutputs = 32;
      auto m = kipp::testing::make_stored_matrix(type, kOutputs, kCols, rng);
      auto x = kipp::testing::make_prepared_rows(kipp::kernels::InputFormat::Q8, rows, kCols, kCols, rng);
      kipp::testing::set_extreme_codes(m, x);
      SCOPED_TRACE(std::string(table.name) + " " + std::string(kipp::ggml_type_name(type)) + " rows " +
                   std::to_string(rows));
      expect_packed_equal(table, m, x);
    }
}

// Matrices that are not whole panels are not packed (pack_weights leaves them alone) and are
// multiplied as stored, bit for bit too.
void stored_partial_panels_equal_reference(const KernelTable& table) {
  std::mt19937 rng(313);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_1})
    for (size_t outputs : {1, 13, 37})
      for (size_t rows : {1, 2, 9}) {
        SCOPED_TRACE(std::string(table.name) + " " + std::string(kipp::ggml_type_name(type)) + " outputs " +
                     std::to_string(outputs) + " rows " + std::to_string(rows));
        const auto m = kipp::testing::make_stored_matrix(type, outputs, 96, rng);
        EXPECT_FALSE(table.packs_weights(m.w));
        std::vector<uint8_t> untouched(m.bytes.size(), 0xA5), packed = untouched;
        EXPECT_FALSE(table.pack_weights(m.w, packed.data()));
        EXPECT_EQ(packed, untouched);
        const auto x = kipp::testing::make_prepared_rows(kipp::kernels::InputFormat::Q8, rows, 96, 96, rng);
        std::vector<float> expected(rows * outputs), got(rows * outputs, NAN);
        ref::matmul(m.w, x.in, expected.data(), outputs);
        table.matmul(m.w, x.in, got.data(), outputs);
        for (size_t i = 0; i < expected.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(expected[i])) << "result " << i;
      }
}

TEST(KernelInt8Avx2, TheTablesAreOfferedExactlyWhereTheCpuRunsThem) {
  EXPECT_EQ(table_or_null("avx2") != nullptr, kipp::kernels::avx2::supported());
  EXPECT_EQ(table_or_null("avx2-vnni") != nullptr, kipp::kernels::avx2::vnni_supported());
}

TEST(KernelInt8Avx2, PackedPanelsEqualReference) {
  TABLE_OR_SKIP(table, "avx2", "AVX2, FMA or F16C");
  packed_shapes_equal_reference(*table);
}

TEST(KernelInt8Avx2, PackedExtremesEqualReference) {
  TABLE_OR_SKIP(table, "avx2", "AVX2, FMA or F16C");
  packed_extremes_equal_reference(*table);
}

TEST(KernelInt8Avx2, PartialPanelsReadAsStoredEqualReference) {
  TABLE_OR_SKIP(table, "avx2", "AVX2, FMA or F16C");
  stored_partial_panels_equal_reference(*table);
}

TEST(KernelInt8Avx2Vnni, PackedPanelsEqualReference) {
  TABLE_OR_SKIP(table, "avx2-vnni", "AVX-VNNI (or AVX2)");
  packed_shapes_equal_reference(*table);
}

TEST(KernelInt8Avx2Vnni, PackedExtremesEqualReference) {
  TABLE_OR_SKIP(table, "avx2-vnni", "AVX-VNNI (or AVX2)");
  packed_extremes_equal_reference(*table);
}

TEST(KernelInt8Avx2Vnni, PartialPanelsReadAsStoredEqualReference) {
  TABLE_OR_SKIP(table, "avx2-vnni", "AVX-VNNI (or AVX2)");
  stored_partial_panels_equal_reference(*table);
}

}  // namespace
