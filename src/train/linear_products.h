// The three matrix products of a linear layer's forward and backward pass, over FP32 buffers in
// row-major order with PyTorch's [out, in] weights. The training model multiplies only through
// this interface, so its precision (FP32 through OpenBLAS, or BF16 operands with FP32
// accumulation) is one choice made at creation.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "core/status.h"

namespace kipp::train {

enum class Precision { Fp32, Bf16 };

// "fp32" / "bf16" (the `train.precision` values).
std::string_view precision_name(Precision precision);
Expected<Precision> parse_precision(std::string_view name);

class LinearProducts {
 public:
  virtual ~LinearProducts() = default;

  // y[m, n] = x[m, k] w[n, k]^T + beta * y.
  virtual void xwt(const float* x, const float* w, size_t m, size_t n, size_t k, float beta, float* y) = 0;
  // dx[m, k] = dy[m, n] w[n, k].
  void dy_w(const float* dy, const float* w, size_t m, size_t n, size_t k, float* dx) {
    dy_w_strided(dy, n, w, m, n, k, 0.0f, dx);
  }
  // dx[m, k] = dy[m, n] w[n, k] + beta * dx with dy's rows dy_stride floats apart: a LoRA base
  // multiplies its dx a block of w's rows (a column range of dy) at a time.
  virtual void dy_w_strided(const float* dy, size_t dy_stride, const float* w, size_t m, size_t n, size_t k, float beta,
                            float* dx) = 0;
  // dw[n, k] += dy[m, n]^T x[m, k].
  virtual void dyt_x(const float* dy, const float* x, size_t m, size_t n, size_t k, float* dw) = 0;
};

// The products of `precision`; nothing is allocated per call by the FP32 products.
Expected<std::unique_ptr<LinearProducts>> make_linear_products(Precision precision);

}  // namespace kipp::train
