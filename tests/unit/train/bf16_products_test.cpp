// The BF16 training products on every kernel table this CPU runs: each of the three products on
// shapes that are not whole panels or blocks (odd reduction lengths included) against a double
// sum over the BF16-rounded operands, and the FP32-to-panel packing against the BF16 one.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/bf16_panels.h"
#include "kernels/cpu/kernels.h"
#include "train/bf16_products.h"

namespace {

using namespace kipp;
using namespace kipp::train;

std::vector<float> random_values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(rng);
  return values;
}

double rounded(float value) { return double(bf16_to_f32(f32_to_bf16(value))); }

// An FP32 sum of k products, each exact, in any order, is within (k - 1) * 2^-24 of the sum of
// their magnitudes (Higham's gamma bound, first order); the beta term adds one rounding of its own.
double sum_bound(size_t k, double magnitudes) { return (double(k) + 2) * std::ldexp(1.0, -24) * magnitudes; }

struct Shape {
  size_t m, n, k;
};

// Shapes around the panel (16), block (32) and row-chunk sizes, with odd reduction lengths.
constexpr Shape kShapes[] = {{1, 1, 1}, {3, 17, 33}, {20, 45, 7}, {37, 16, 64}, {300, 50, 99}, {5, 130, 161}};

// out = x w^T + beta * out, dx = dy w, dw += dy^T x, each element against the double sum of the
// BF16-rounded operands.
void check_products(LinearProducts& products, const Shape& s, const char* table) {
  const std::vector<float> x = random_values(s.m * s.k, 1), w = random_values(s.n * s.k, 2),
                           dy = random_values(s.m * s.n, 3), start = random_values(s.m * s.n, 4),
                           dw_start = random_values(s.n * s.k, 5);
  const std::string where =
      std::string(table) + " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
  for (float beta : {0.0f, 1.0f}) {
    std::vector<float> y = start;
    products.xwt(x.data(), w.data(), s.m, s.n, s.k, beta, y.data());
    for (size_t i = 0; i < s.m; ++i)
      for (size_t j = 0; j < s.n; ++j) {
        double sum = 0, magnitudes = 0;
        for (size_t l = 0; l < s.k; ++l) {
          const double p = rounded(x[i * s.k + l]) * rounded(w[j * s.k + l]);
          sum += p;
          magnitudes += std::fabs(p);
        }
        const double extra = double(beta) * double(start[i * s.n + j]);
        ASSERT_NEAR(y[i * s.n + j], sum + extra, sum_bound(s.k, magnitudes + std::fabs(extra)))
            << "xwt " << where << " beta " << beta << " at " << i << "," << j;
      }
  }
  std::vector<float> dx(s.m * s.k, NAN);
  products.dy_w(dy.data(), w.data(), s.m, s.n, s.k, dx.data());
  for (size_t i = 0; i < s.m; ++i)
    for (size_t l = 0; l < s.k; ++l) {
      double sum = 0, magnitudes = 0;
      for (size_t j = 0; j < s.n; ++j) {
        const double p = rounded(dy[i * s.n + j]) * rounded(w[j * s.k + l]);
        sum += p;
        magnitudes += std::fabs(p);
      }
      ASSERT_NEAR(dx[i * s.k + l], sum, sum_bound(s.n, magnitudes)) << "dy_w " << where << " at " << i << "," << l;
    }
  // The same dx from a column range of a wider dy, added to what dx held: a row's sums do not
  // depend on how the rows are grouped, so the result is exactly twice dx.
  const size_t wide = s.n + 3;
  std::vector<float> dy_wide(s.m * wide, 7.0f), dx_sum = dx;
  for (size_t i = 0; i < s.m; ++i) std::copy_n(dy.data() + i * s.n, s.n, dy_wide.data() + i * wide + 2);
  products.dy_w_strided(dy_wide.data() + 2, wide, w.data(), s.m, s.n, s.k, 1.0f, dx_sum.data());
  for (size_t i = 0; i < s.m * s.k; ++i) {
    ASSERT_EQ(dx_sum[i], 2.0f * dx[i]) << "dy_w_strided " << where << " at " << i;
  }
  std::vector<float> dw = dw_start;
  products.dyt_x(dy.data(), x.data(), s.m, s.n, s.k, dw.data());
  for (size_t j = 0; j < s.n; ++j)
    for (size_t l = 0; l < s.k; ++l) {
      double sum = double(dw_start[j * s.k + l]), magnitudes = std::fabs(sum);
      for (size_t i = 0; i < s.m; ++i) {
        const double p = rounded(dy[i * s.n + j]) * rounded(x[i * s.k + l]);
        sum += p;
        magnitudes += std::fabs(p);
      }
      ASSERT_NEAR(dw[j * s.k + l], sum, sum_bound(s.m, magnitudes)) << "dyt_x " << where << " at " << j << "," << l;
    }
}

TEST(Bf16Products, EveryProductOnEveryTableAgainstDoubleSums) {
  for (const kernels::KernelTable* table : kernels::available_kernel_tables()) {
    auto products = make_bf16_products(*table);
    // The same object twice over the shapes: buffers grown by a larger product serve the next.
    for (int pass = 0; pass < 2; ++pass)
      for (const Shape& shape : kShapes) check_products(*products, shape, table->name);
  }
}

// The same values on any number of threads (each splits the panels differently), every product.
TEST(Bf16Products, ResultsDoNotDependOnTheThreadCount) {
  const size_t m = 70, n = 90, k = 75;
  const std::vector<float> x = random_values(m * k, 6), w = random_values(n * k, 7), dy = random_values(m * n, 8);
  const int threads = omp_get_max_threads();
  std::vector<std::vector<float>> runs;
  for (int team : {1, 2, 3}) {
    omp_set_num_threads(team);
    auto products = make_bf16_products(kernels::cpu_kernels());
    std::vector<float> y(m * n), dx(m * k), dw(n * k, 0.5f);
    products->xwt(x.data(), w.data(), m, n, k, 0.0f, y.data());
    products->dy_w(dy.data(), w.data(), m, n, k, dx.data());
    products->dyt_x(dy.data(), x.data(), m, n, k, dw.data());
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dw.begin(), dw.end());
    runs.push_back(y);
  }
  omp_set_num_threads(threads);
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

// pack_f32_bf16_panels, row-major and transposed, over any range of panels equals rounding the
// zero-padded matrix to BF16 rows and packing them with pack_bf16_panels.
TEST(Bf16Panels, PackingFromFp32EqualsPackingRoundedRows) {
  for (const Shape& s : kShapes) {
    const size_t rows = s.n, cols = s.k;
    const size_t padded_rows = (rows + 15) / 16 * 16, padded_cols = (cols + 31) / 32 * 32;
    const std::vector<float> a = random_values(rows * cols, 8);
    std::vector<uint16_t> stored(padded_rows * padded_cols, 0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) stored[r * padded_cols + c] = f32_to_bf16(a[r * cols + c]);
    const kernels::WeightMatrix w{GgmlType::BF16, reinterpret_cast<const uint8_t*>(stored.data()), padded_rows,
                                  padded_cols, padded_cols * 2};
    std::vector<uint16_t> expected(stored.size());
    kernels::pack_bf16_panels(w, reinterpret_cast<uint8_t*>(expected.data()));
    // The transpose of `a` stored column-major is a itself read with swapped strides.
    std::vector<float> transposed(rows * cols);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) transposed[c * rows + r] = a[r * cols + c];
    const size_t panels = padded_rows / 16, panel_elements = 16 * padded_cols;
    for (size_t first = 0; first < panels; ++first) {
      std::vector<uint16_t> row_major((panels - first) * panel_elements, 1), column_major(row_major);
      kernels::pack_f32_bf16_panels(a.data(), rows, cols, cols, 1, first, panels,
                                    reinterpret_cast<uint8_t*>(row_major.data()));
      kernels::pack_f32_bf16_panels(transposed.data(), rows, cols, 1, rows, first, panels,
                                    reinterpret_cast<uint8_t*>(column_major.data()));
      const std::vector<uint16_t> tail(expected.begin() + long(first * panel_elements), expected.end());
      EXPECT_EQ(row_major, tail) << rows << "x" << cols << " from panel " << first;
      EXPECT_EQ(column_major, tail) << rows << "x" << cols << " from panel " << first;
    }
  }
}

}  // namespace
