// The per-element arithmetic of the GPU training kernels, as __host__ __device__ functions, so
// the CPU unit tests run the very code the kernels run against the CPU trainer (train/adamw.cpp,
// train/fused_ops.cpp). On the device every operation is an explicitly rounded intrinsic: nvcc
// would otherwise contract a multiply and an add into one FMA, which the CPU build does not do,
// and the AdamW update is promised bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/rounded_math.h"

namespace kipp::cuda::train {

using math::add;
using math::div;
using math::mul;
using math::sqrt_rn;
using math::sub;

// ---- AdamW ----------------------------------------------------------------------------------

// The step's scalars, rounded to float once on the host exactly as AdamW::step rounds them.
struct AdamWScalars {
  float beta1 = 0, beta2 = 0;
  float step_size = 0;   // lr / (1 - beta1^t)
  float bias2_sqrt = 0;  // sqrt(1 - beta2^t)
  float eps = 0;
  float keep_decayed = 1;  // 1 - lr * weight_decay, the factor of decayed tensors
};

// `step` is the 1-based number of the update being applied.
inline AdamWScalars adamw_scalars(double beta1, double beta2, double eps, double weight_decay, double lr,
                                  uint64_t step) {
  AdamWScalars s;
  s.beta1 = float(beta1);
  s.beta2 = float(beta2);
  s.step_size = float(lr) / float(1.0 - std::pow(beta1, double(step)));
  s.bias2_sqrt = float(std::sqrt(1.0 - std::pow(beta2, double(step))));
  s.eps = float(eps);
  s.keep_decayed = 1.0f - float(lr * weight_decay);
  return s;
}

// PyTorch's order: decay first, then the Adam update with denominator sqrt(v) / sqrt(1 - beta2^t) + eps.
KIPP_CUDA_HD void adamw_element(float& p, float& m, float& v, float g, float keep, const AdamWScalars& s) {
  p = mul(p, keep);
  m = add(mul(s.beta1, m), mul(sub(1.0f, s.beta1), g));
  v = add(mul(s.beta2, v), mul(mul(sub(1.0f, s.beta2), g), g));
  p = sub(p, div(mul(s.step_size, m), add(div(sqrt_rn(v), s.bias2_sqrt), s.eps)));
}

// ---- SwiGLU ---------------------------------------------------------------------------------

// e^x to about 1 ulp (Cephes' expf polynomial), the one the CPU trainer's passes use; below
// -87.3 it returns 0, NaN stays NaN.
KIPP_CUDA_HD float fast_exp(float x) {
  const float clamped = x > 88.3f ? 88.3f : (x < -87.3f ? -87.3f : x);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float shifted = add(mul(clamped, 1.44269504f), kRound);
  const float n = sub(shifted, kRound);
  const float r = add(sub(clamped, mul(n, 0.693359375f)), mul(n, 2.12194440e-4f));
  float p = 1.9875691500e-4f;
  p = add(mul(p, r), 1.3981999507e-3f);
  p = add(mul(p, r), 8.3334519073e-3f);
  p = add(mul(p, r), 4.1665795894e-2f);
  p = add(mul(p, r), 1.6666665459e-1f);
  p = add(mul(p, r), 5.0000001201e-1f);
  p = add(add(mul(mul(p, r), r), r), 1.0f);
  const float scale = math::bits_to_float((math::float_to_bits(shifted) - 0x4B400000u + 127u) << 23);
  return x < -87.3f ? 0.0f : mul(p, scale);
}

// act = silu(gate) * up.
KIPP_CUDA_HD float swiglu_element(float gate, float up) { return mul(div(gate, add(1.0f, fast_exp(-gate))), up); }

// From d(act): d(gate) and d(up), and act recomputed (the down projection's weight gradient input).
KIPP_CUDA_HD void swiglu_backward_element(float gate, float up, float dact, float& dgate, float& dup, float& act) {
  const float denominator = add(1.0f, fast_exp(-gate));
  const float sigmoid = div(1.0f, denominator);
  dgate = mul(mul(mul(dact, up), sigmoid), add(1.0f, mul(gate, sub(1.0f, sigmoid))));
  dup = mul(mul(dact, gate), sigmoid);
  act = mul(div(gate, denominator), up);
}

// ---- RMSNorm --------------------------------------------------------------------------------

// 1 / sqrt(mean(x^2) + eps) from the row's sum of squares.
KIPP_CUDA_HD float inverse_rms(float sum_of_squares, uint32_t width, float eps) {
  return div(1.0f, sqrt_rn(add(div(sum_of_squares, float(width)), eps)));
}

// One element of the backward: with n = x * rstd and mean = sum(dy * gain * n) / width,
// dx = rstd * (dy * gain - n * mean).
KIPP_CUDA_HD float rmsnorm_dx(float dy, float x, float gain, float rstd, float mean) {
  return mul(rstd, sub(mul(dy, gain), mul(mul(x, rstd), mean)));
}

}  // namespace kipp::cuda::train
