// Every SIMD kernel table this CPU runs, held to the scalar reference (src/kernels/ref): the
// same prepared inputs, products within 1e-6 of the sum of absolute terms (the two differ only
// in the order float sums are added), and the determinism contract — a row's results do not
// depend on how many rows or which outputs are computed together.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "matmul_fixtures.h"

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
        for (size_t rows : {1, 2, 3, 5, 9})
          for (size_t outputs : {1, 3, 8, 13, 37}) {
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

}  // namespace
