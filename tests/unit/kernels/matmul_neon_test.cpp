// The NEON products held to the scalar reference directly, on every set of optional instructions
// this CPU has (so the widening fallbacks run on CPUs with SDOT and BFDOT too): the same prepared
// inputs, quantized products equal bit for bit (also at the codes' extremes), BF16 products
// within 1e-6 of the sum of absolute terms, over row and output counts that leave partial tiles.
// Built for ARM64 only, as the table is.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "format/quant.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matmul_neon.h"
#include "unit/helpers/matmul_fixtures.h"

namespace {

using kipp::GgmlType;
namespace neon = kipp::kernels::neon;
namespace ref = kipp::kernels::ref;

constexpr double kBf16Tolerance = 1e-6;

// Every subset of the optional instructions this CPU has.
std::vector<neon::Features> feature_sets() {
  const neon::Features cpu = neon::cpu_features();
  std::vector<neon::Features> sets;
  for (bool dotprod : {false, true})
    for (bool bf16 : {false, true})
      if ((!dotprod || cpu.dotprod) && (!bf16 || cpu.bf16)) sets.push_back({dotprod, bf16});
  return sets;
}

std::string describe(const neon::Features& f) {
  return std::string(f.dotprod ? "sdot" : "widening int8") + ", " + (f.bf16 ? "bfdot" : "widened bf16");
}

// ref::matmul and neon::matmul_with into outputs `stride` apart (the gaps must stay untouched).
void expect_equal_products(const neon::Features& features, const kipp::testing::StoredMatrix& m,
                           const kipp::testing::PreparedRows& x, GgmlType type) {
  const size_t rows = x.in.rows, outputs = m.w.rows, stride = outputs + 3;
  std::vector<float> expected(rows * stride, NAN), got(rows * stride, NAN);
  ref::matmul(m.w, x.in, expected.data(), stride);
  neon::matmul_with(features, m.w, x.in, got.data(), stride);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t o = 0; o < outputs; ++o) {
      const size_t i = r * stride + o;
      if (type == GgmlType::BF16)
        ASSERT_NEAR(got[i], expected[i], kBf16Tolerance * kipp::testing::exact_product(m, x, o, r).magnitude)
            << "row " << r << " output " << o;
      else
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(expected[i]))
            << "row " << r << " output " << o;
    }
    for (size_t o = outputs; o < stride; ++o) ASSERT_TRUE(std::isnan(got[r * stride + o])) << "gap after row " << r;
  }
}

TEST(KernelNeonMatmul, TheTableIsOfferedAndChosen) {
  const kipp::kernels::KernelTable* table = kipp::kernels::find_kernel_table("neon");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->matmul, &neon::matmul);
  EXPECT_EQ(kipp::kernels::available_kernel_tables().back(), table);
}

TEST(KernelNeonMatmul, EqualsReferenceOnOddShapes) {
  for (const neon::Features& features : feature_sets()) {
    SCOPED_TRACE(describe(features));
    std::mt19937 rng(211);
    for (GgmlType type : {GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_1}) {
      std::vector<size_t> widths = {32, 64, 1024};
      if (type == GgmlType::BF16) widths.insert(widths.end(), {4, 8, 24, 200});  // partial 8-value steps
      for (size_t cols : widths)
        for (size_t rows : {1, 2, 3, 4, 5, 8, 9, 17})
          for (size_t outputs : {1, 5, 8, 11, 33, 70}) {
            SCOPED_TRACE(std::string(kipp::ggml_type_name(type)) + " cols " + std::to_string(cols) + " rows " +
                         std::to_string(rows) + " outputs " + std::to_string(outputs));
            const auto m = kipp::testing::make_stored_matrix(type, outputs, cols, rng);
            const auto x = kipp::testing::make_prepared_rows(kipp::kernels::input_format(type), rows, cols, cols, rng);
            expect_equal_products(features, m, x, type);
          }
    }
  }
}

// Weight codes of the largest magnitude (Q8_0 -128 and 127, affine4 15) against input codes of
// +-127: every product sits at its largest, and a saturating or sign-losing step would show.
TEST(KernelNeonMatmul, QuantizedExtremesEqualReference) {
  for (const neon::Features& features : feature_sets()) {
    SCOPED_TRACE(describe(features));
    std::mt19937 rng(223);
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_1}) {
      constexpr size_t kCols = 128, kOutputs = 11, kRows = 5;
      auto m = kipp::testing::make_stored_matrix(type, kOutputs, kCols, rng);
      auto x = kipp::testing::make_prepared_rows(kipp::kernels::InputFormat::Q8, kRows, kCols, kCols, rng);
      kipp::testing::set_extreme_codes(m, x);
      SCOPED_TRACE(std::string(kipp::ggml_type_name(type)));
      expect_equal_products(features, m, x, type);
    }
  }
}

}  // namespace
