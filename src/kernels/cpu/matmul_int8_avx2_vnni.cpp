// The AVX-VNNI instantiation of the packed-panel products (matmul_int8_avx2_panels.h).
#include "kernels/cpu/cpuid_features.h"
#include "kernels/cpu/matmul_avx2.h"
#include "kernels/cpu/matmul_int8_avx2.h"

#define KIPP_INT8_TARGET KIPP_AVX2_VNNI
#include "kernels/cpu/matmul_int8_avx2_panels.h"

namespace kipp::kernels::avx2 {

bool vnni_supported() {
  __builtin_cpu_init();
  return supported() && cpu_has_avx_vnni();
}

void quantized_matmul_vnni(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  // Matrices read as stored take the AVX2 kernel: its sums are exact too.
  if (!w.panels) return quantized_matmul(w, in, out, out_stride);
  return w.type == GgmlType::Q4_1 ? panels_matmul<true, true>(w, in, out, out_stride)
                                  : panels_matmul<true, false>(w, in, out, out_stride);
}

void matmul_vnni(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  if ((w.type == GgmlType::Q8_0 || w.type == GgmlType::Q4_1) && in.format == InputFormat::Q8)
    return quantized_matmul_vnni(w, in, out, out_stride);
  matmul(w, in, out, out_stride);
}

}  // namespace kipp::kernels::avx2
