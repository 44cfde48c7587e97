// The AVX2 products held to the scalar reference directly (whatever table this CPU would choose):
// the same prepared inputs, quantized products equal bit for bit (also at the codes' extremes,
// where VPMADDUBSW's 16-bit pair sums come closest to saturating), BF16 products within 1e-6 of
// the sum of absolute terms, over row and output counts that leave partial tiles.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "format/quant.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matmul_avx2.h"
#include "unit/helpers/matmul_fixtures.h"

namespace {

using kipp::GgmlType;
namespace avx2 = kipp::kernels::avx2;
namespace ref = kipp::kernels::ref;

constexpr double kBf16Tolerance = 1e-6;

#define SKIP_WITHOUT_AVX2() \
  if (!avx2::supported()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C"

// ref::matmul and avx2::matmul into outputs `stride` apart (the gaps must stay untouched).
void expect_equal_products(const kipp::testing::StoredMatrix& m, const kipp::testing::PreparedRows& x, GgmlType type) {
  const size_t rows = x.in.rows, outputs = m.w.rows, stride = outputs + 3;
  std::vector<float> expected(rows * stride, NAN), got(rows * stride, NAN);
  ref::matmul(m.w, x.in, expected.data(), stride);
  avx2::matmul(m.w, x.in, got.data(), stride);
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

TEST(KernelAvx2Matmul, TheTableIsOfferedExactlyWhereTheCpuRunsIt) {
  EXPECT_EQ(kipp::kernels::find_kernel_table("avx2") != nullptr, avx2::supported());
}

TEST(KernelAvx2Matmul, EqualsReferenceOnOddShapes) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(211);
  for (GgmlType type : {GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_1}) {
    std::vector<size_t> widths = {32, 64, 1024};
    if (type == GgmlType::BF16) widths.insert(widths.end(), {8, 24, 200});  // partial 16-value steps
    for (size_t cols : widths)
      for (size_t rows : {1, 3, 4, 5, 8, 17})
        for (size_t outputs : {1, 5, 8, 11, 33, 70}) {
          SCOPED_TRACE(std::string(kipp::ggml_type_name(type)) + " cols " + std::to_string(cols) + " rows " +
                       std::to_string(rows) + " outputs " + std::to_string(outputs));
          const auto m = kipp::testing::make_stored_matrix(type, outputs, cols, rng);
          const auto x = kipp::testing::make_prepared_rows(kipp::kernels::input_format(type), rows, cols, cols, rng);
          expect_equal_products(m, x, type);
        }
  }
}

// Weight codes of the largest magnitude (Q8_0 -128 and 127, affine4 15) against input codes of
// +-127: every pair of products sits at its largest, and a saturating or sign-losing step would
// show.
TEST(KernelAvx2Matmul, QuantizedExtremesEqualReference) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(223);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_1}) {
    constexpr size_t kCols = 128, kOutputs = 11, kRows = 5;
    auto m = kipp::testing::make_stored_matrix(type, kOutputs, kCols, rng);
    auto x = kipp::testing::make_prepared_rows(kipp::kernels::InputFormat::Q8, kRows, kCols, kCols, rng);
    kipp::testing::set_extreme_codes(m, x);
    SCOPED_TRACE(std::string(kipp::ggml_type_name(type)));
    const size_t stride = kOutputs;
    std::vector<float> expected(kRows * stride), got(kRows * stride);
    ref::matmul(m.w, x.in, expected.data(), stride);
    avx2::matmul(m.w, x.in, got.data(), stride);
    for (size_t i = 0; i < expected.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(expected[i])) << "result " << i;
  }
}

}  // namespace
