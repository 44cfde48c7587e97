#include "train/bf16_products.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/bf16_panels.h"
#include "kernels/matmul_input.h"
#include "kernels/weights.h"

namespace kipp::train {
namespace {

using kernels::kBf16BlockColumns;
using kernels::kBf16PanelRows;

// Input rows per kernel call where results are added into the output (or cover part of a panel),
// so that the results waiting to be added fit a small scratch.
constexpr size_t kRowsPerChunk = 256;

// Multiply-adds below which a product runs on the calling thread alone: waking the team would
// cost more than it saves.
constexpr size_t kMinSharedProduct = size_t{1} << 16;

size_t round_up(size_t value, size_t to) { return (value + to - 1) / to * to; }

// An FP32 matrix read through strides: element (r, c) at data[r * row_stride + c * col_stride],
// so one buffer serves as itself (col_stride 1) or as its transpose (row_stride 1).
struct Strided {
  const float* data;
  size_t row_stride;
  size_t col_stride;
};

class Bf16Products final : public LinearProducts {
 public:
  explicit Bf16Products(const kernels::KernelTable& kernels)
      : kernels_(kernels), panels_(kernels.packs_weights != nullptr && kernels.packs_weights(panel_probe())) {}

  void xwt(const float* x, const float* w, size_t m, size_t n, size_t k, float beta, float* y) override {
    product({x, k, 1}, {w, k, 1}, m, n, k, beta, y);
  }
  void dy_w_strided(const float* dy, size_t dy_stride, const float* w, size_t m, size_t n, size_t k, float beta,
                    float* dx) override {
    product({dy, dy_stride, 1}, {w, 1, k}, m, k, n, beta, dx);
  }
  void dyt_x(const float* dy, const float* x, size_t m, size_t n, size_t k, float* dw) override {
    product({dy, 1, n}, {x, 1, k}, n, k, m, 1.0f, dw);
  }

 private:
  // Whether the table packs a BF16 matrix of whole panels: every table that does arranges it as
  // bf16_panels.h's panels, which pack_f32_bf16_panels writes straight from FP32.
  static kernels::WeightMatrix panel_probe() {
    return {GgmlType::BF16, nullptr, kBf16PanelRows, kBf16BlockColumns, kBf16BlockColumns * 2, false};
  }

  // out[i, j] = sum over l < k of x(i, l) b(j, l) + beta * out[i, j] for i < m, j < n (out row
  // stride n; beta 0 ignores what out held), both operands rounded to BF16, sums in FP32. The
  // rounded x is shared by all threads; each thread rounds and multiplies its own panels of b.
  void product(const Strided& x, const Strided& b, size_t m, size_t n, size_t k, float beta, float* out) {
    if (m == 0 || n == 0) return;
    if (k == 0) {
      for (size_t i = 0; i < m * n; ++i) out[i] = beta == 0.0f ? 0.0f : beta * out[i];
      return;
    }
    const size_t padded = round_up(k, kBf16BlockColumns), panels = (n + kBf16PanelRows - 1) / kBf16PanelRows;
    if (input_.size() < m * padded) input_.resize(m * padded);
    if (matrix_.size() < panels * kBf16PanelRows * padded) matrix_.resize(panels * kBf16PanelRows * padded);
    const int team = m * n * k < kMinSharedProduct ? 1 : omp_get_max_threads();
    if (threads_.size() < size_t(team)) threads_.resize(size_t(team));
#pragma omp parallel num_threads(team)
    {
      const size_t t = size_t(omp_get_thread_num()), count = size_t(omp_get_num_threads());
#pragma omp for schedule(static)
      for (size_t first = 0; first < m; first += kBf16PanelRows)
        kernels::round_f32_bf16_rows(x.data, x.row_stride, x.col_stride, k, padded, first,
                                     std::min(m, first + kBf16PanelRows), input_.data());
      // This thread's panels [first, end) of b, rounded and packed (or rounded into rows for a
      // table that reads BF16 rows as stored) into its own part of the shared matrix.
      const size_t first = panels * t / count, end = panels * (t + 1) / count;
      if (first < end) {
        const size_t first_row = first * kBf16PanelRows;
        const size_t live = std::min(n, end * kBf16PanelRows) - first_row;  // output columns
        const size_t rows = panels_ ? (end - first) * kBf16PanelRows : live;
        uint16_t* matrix = matrix_.data() + first_row * padded;
        if (panels_) {
          kernels::pack_f32_bf16_panels(b.data, n, k, b.row_stride, b.col_stride, first, end,
                                        reinterpret_cast<uint8_t*>(matrix));
        } else {
          kernels::round_f32_bf16_rows(b.data + first_row * b.row_stride, b.row_stride, b.col_stride, k, padded, 0,
                                       rows, matrix);
        }
        const kernels::WeightMatrix w{
            GgmlType::BF16, reinterpret_cast<const uint8_t*>(matrix), rows, padded, padded * 2, panels_};
        kernels::PreparedInput in;
        in.format = kernels::InputFormat::BF16;
        in.cols = padded;
        if (beta == 0.0f && rows == live) {
          // Whole panels inside the output, overwritten: the kernel writes there itself, all
          // rows in one call.
          in.rows = m;
          in.bf16 = input_.data();
          kernels_.matmul(w, in, out + first_row, n);
        } else {
          std::vector<float>& results = threads_[t];
          for (size_t row = 0; row < m; row += kRowsPerChunk) {
            in.rows = std::min(kRowsPerChunk, m - row);
            in.bf16 = input_.data() + row * padded;
            if (results.size() < in.rows * rows) results.resize(in.rows * rows);
            kernels_.matmul(w, in, results.data(), rows);
            float* to = out + row * n + first_row;
            for (size_t r = 0; r < in.rows; ++r)
              for (size_t c = 0; c < live; ++c) {
                const float result = results[r * rows + c];
                to[r * n + c] = beta == 0.0f ? result : result + beta * to[r * n + c];
              }
          }
        }
      }
    }
  }

  const kernels::KernelTable& kernels_;
  const bool panels_;
  std::vector<uint16_t> input_;              // x rounded to BF16, rows padded to whole 32-column blocks
  std::vector<uint16_t> matrix_;             // b rounded to BF16, as panels or rows (padded likewise)
  std::vector<std::vector<float>> threads_;  // per thread: results waiting to be added to out
};

}  // namespace

std::unique_ptr<LinearProducts> make_bf16_products(const kernels::KernelTable& kernels) {
  return std::make_unique<Bf16Products>(kernels);
}

}  // namespace kipp::train
