#include "kernels/cpu/kernels.h"

namespace kipp::kernels {

const KernelTable& cpu_kernels() {
  static const KernelTable reference{
      "reference",    &ref::dequantize_row, &ref::matmul, &ref::rms_norm, &ref::rope_angles, &ref::rope,
      &ref::attention, &ref::swiglu,        &ref::add,    &ref::store_bf16};
  return reference;
}

}  // namespace kipp::kernels
