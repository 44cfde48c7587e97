// Float operations rounded on their own, as functions that compile for the host and the device
// alike. nvcc would otherwise contract a * b + c into one fused multiply-add and change the last
// bit; the host side is plain C++ (the CPU references are built without contraction), so the unit
// tests run the very arithmetic the kernels run. Also the bit casts both sides need.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define KIPP_CUDA_HD __host__ __device__ __forceinline__
#else
#define KIPP_CUDA_HD inline
#endif

namespace kipp::cuda::math {

KIPP_CUDA_HD float mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

KIPP_CUDA_HD float add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

KIPP_CUDA_HD float sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

KIPP_CUDA_HD float div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

KIPP_CUDA_HD float sqrt_rn(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

KIPP_CUDA_HD float bits_to_float(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

KIPP_CUDA_HD uint32_t float_to_bits(float value) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

}  // namespace kipp::cuda::math
