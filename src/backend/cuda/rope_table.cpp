#include "backend/cuda/rope_table.h"

#include "kernels/ref/ops.h"

namespace kipp::cuda {

std::vector<float> rope_table(uint32_t positions, uint32_t head_dim, double theta) {
  std::vector<float> table(size_t{positions} * head_dim);
  const size_t half = head_dim / 2;
  for (size_t p = 0; p < positions; ++p) {
    float* row = table.data() + p * head_dim;
    kernels::ref::rope_angles(p, head_dim, theta, row, row + half);
  }
  return table;
}

}  // namespace kipp::cuda
