#pragma once

// CPU features that GCC's __builtin_cpu_supports can name but clang's (before clang 16) cannot,
// read from their CPUID bits so both compilers build the same check. The bits say nothing about
// the OS saving the AVX state: callers pair them with __builtin_cpu_supports("avx2") or
// ("avx512f"), which includes that.
#include <cpuid.h>

namespace kipp::kernels {

inline bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

inline bool cpu_has_avx_vnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & bit_AVXVNNI) != 0;
}

}  // namespace kipp::kernels
