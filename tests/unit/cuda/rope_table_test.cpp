#include "backend/cuda/rope_table.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernels/ref/ops.h"

namespace kipp::cuda {
namespace {

TEST(CudaRopeTable, EqualsTheReferenceAnglesBitForBit) {
  const uint32_t positions = 3000, head_dim = 128;
  const double theta = 1000000.0;
  const std::vector<float> table = rope_table(positions, head_dim, theta);
  ASSERT_EQ(table.size(), size_t{positions} * head_dim);
  std::vector<float> cos(head_dim / 2), sin(head_dim / 2);
  for (uint32_t p : {0u, 1u, 31u, 32u, 1000u, 2999u}) {
    kernels::ref::rope_angles(p, head_dim, theta, cos.data(), sin.data());
    EXPECT_EQ(std::memcmp(table.data() + size_t{p} * head_dim, cos.data(), cos.size() * sizeof(float)), 0) << p;
    EXPECT_EQ(std::memcmp(table.data() + size_t{p} * head_dim + head_dim / 2, sin.data(), sin.size() * sizeof(float)),
              0)
        << p;
  }
}

}  // namespace
}  // namespace kipp::cuda
