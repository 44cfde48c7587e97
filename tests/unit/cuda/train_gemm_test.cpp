// The BF16 products' mapping onto cuBLASLt's column-major GEMM, checked without a GPU: a plain
// column-major D = op(A) op(B) over the operands TrainGemm::operands describes, reading our
// row-major buffers, gives each product's row-major definition.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/train_gemm.h"
#include "unit/helpers/random_values.h"

namespace kipp::cuda::train {
namespace {

using kipp::test_support::normal_values;
using Shape = TrainGemm::Shape;

// Element (r, c) of op(M) for a column-major M with `rows` rows (its leading dimension).
double op_at(const std::vector<float>& m, uint64_t rows, cublasOperation_t op, uint64_t r, uint64_t c) {
  return op == CUBLAS_OP_N ? m[c * rows + r] : m[r * rows + c];
}

// D = op(A) op(B) as cuBLASLt defines it, D column-major.
std::vector<double> column_major_product(const TrainGemm::Operands& o, const std::vector<float>& a,
                                         const std::vector<float>& b) {
  const uint64_t inner = o.trans_a == CUBLAS_OP_N ? o.a_cols : o.a_rows;
  EXPECT_EQ(o.trans_a == CUBLAS_OP_N ? o.a_rows : o.a_cols, o.d_rows);
  EXPECT_EQ(o.trans_b == CUBLAS_OP_N ? o.b_cols : o.b_rows, o.d_cols);
  EXPECT_EQ(o.trans_b == CUBLAS_OP_N ? o.b_rows : o.b_cols, inner);
  EXPECT_EQ(a.size(), o.a_rows * o.a_cols);
  EXPECT_EQ(b.size(), o.b_rows * o.b_cols);
  std::vector<double> d(o.d_rows * o.d_cols);
  for (uint64_t r = 0; r < o.d_rows; ++r) {
    for (uint64_t c = 0; c < o.d_cols; ++c) {
      double sum = 0;
      for (uint64_t l = 0; l < inner; ++l)
        sum += op_at(a, o.a_rows, o.trans_a, r, l) * op_at(b, o.b_rows, o.trans_b, l, c);
      d[c * o.d_rows + r] = sum;
    }
  }
  return d;
}

constexpr size_t m = 5, n = 7, k = 3;

TEST(TrainGemm, XwtIsXTimesWTransposed) {
  const std::vector<float> x = normal_values(m * k, 1, 1.0f), w = normal_values(n * k, 2, 1.0f);
  const std::vector<double> d = column_major_product(TrainGemm::operands(Shape::Xwt, m, n, k), w, x);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double want = 0;
      for (size_t l = 0; l < k; ++l) want += double(x[i * k + l]) * w[j * k + l];
      EXPECT_NEAR(d[i * n + j], want, 1e-12) << i << ", " << j;  // y[m, n] row-major
    }
  }
}

TEST(TrainGemm, DyWIsDyTimesW) {
  const std::vector<float> dy = normal_values(m * n, 3, 1.0f), w = normal_values(n * k, 4, 1.0f);
  const std::vector<double> d = column_major_product(TrainGemm::operands(Shape::DyW, m, n, k), w, dy);
  for (size_t i = 0; i < m; ++i) {
    for (size_t l = 0; l < k; ++l) {
      double want = 0;
      for (size_t j = 0; j < n; ++j) want += double(dy[i * n + j]) * w[j * k + l];
      EXPECT_NEAR(d[i * k + l], want, 1e-12) << i << ", " << l;  // dx[m, k] row-major
    }
  }
}

TEST(TrainGemm, DytXIsDyTransposedTimesX) {
  const std::vector<float> dy = normal_values(m * n, 5, 1.0f), x = normal_values(m * k, 6, 1.0f);
  const std::vector<double> d = column_major_product(TrainGemm::operands(Shape::DytX, m, n, k), x, dy);
  for (size_t j = 0; j < n; ++j) {
    for (size_t l = 0; l < k; ++l) {
      double want = 0;
      for (size_t i = 0; i < m; ++i) want += double(dy[i * n + j]) * x[i * k + l];
      EXPECT_NEAR(d[j * k + l], want, 1e-12) << j << ", " << l;  // dw[n, k] row-major
    }
  }
}

}  // namespace
}  // namespace kipp::cuda::train
