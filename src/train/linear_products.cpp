#include "train/linear_products.h"

#include <cblas.h>

#include <string>

#include "train/bf16_products.h"

namespace kipp::train {
namespace {

int as_int(size_t value) { return static_cast<int>(value); }

// Every product through OpenBLAS sgemm.
class Fp32Products final : public LinearProducts {
 public:
  void xwt(const float* x, const float* w, size_t m, size_t n, size_t k, float beta, float* y) override {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_int(m), as_int(n), as_int(k), 1.0f, x, as_int(k), w,
                as_int(k), beta, y, as_int(n));
  }
  void dy_w_strided(const float* dy, size_t dy_stride, const float* w, size_t m, size_t n, size_t k, float beta,
                    float* dx) override {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_int(m), as_int(k), as_int(n), 1.0f, dy, as_int(dy_stride),
                w, as_int(k), beta, dx, as_int(k));
  }
  void dyt_x(const float* dy, const float* x, size_t m, size_t n, size_t k, float* dw) override {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_int(n), as_int(k), as_int(m), 1.0f, dy, as_int(n), x,
                as_int(k), 1.0f, dw, as_int(k));
  }
};

}  // namespace

std::string_view precision_name(Precision precision) { return precision == Precision::Bf16 ? "bf16" : "fp32"; }

Expected<Precision> parse_precision(std::string_view name) {
  if (name == "fp32") return Precision::Fp32;
  if (name == "bf16") return Precision::Bf16;
  return make_error("expected fp32 or bf16, got '" + std::string(name) + "'");
}

Expected<std::unique_ptr<LinearProducts>> make_linear_products(Precision precision) {
  if (precision == Precision::Bf16) return make_bf16_products(kernels::cpu_kernels());
  return std::unique_ptr<LinearProducts>(std::make_unique<Fp32Products>());
}

}  // namespace kipp::train
