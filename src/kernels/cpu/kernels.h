// The one dispatch point through which the CPU backend calls every kernel. Today it selects
// the reference kernels; SIMD variants chosen at start-up plug in here and nowhere else.
#pragma once

#include "kernels/ref/ops.h"

namespace kipp::kernels {

struct KernelTable {
  const char* name;
  decltype(&ref::dequantize_row) dequantize_row;
  decltype(&ref::matmul) matmul;
  decltype(&ref::rms_norm) rms_norm;
  decltype(&ref::rope_angles) rope_angles;
  decltype(&ref::rope) rope;
  decltype(&ref::attention) attention;
  decltype(&ref::swiglu) swiglu;
  decltype(&ref::add) add;
  decltype(&ref::store_bf16) store_bf16;
};

const KernelTable& cpu_kernels();

}  // namespace kipp::kernels
