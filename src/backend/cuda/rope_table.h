// The rotary angles of every position of the context, computed once on the host by the CPU's
// own kernels::ref::rope_angles so the GPU rotates by the same floats, bit for bit.
#pragma once

#include <cstdint>
#include <vector>

namespace kipp::cuda {

// Position p's cos of pair i at [p * head_dim + i], its sin at [p * head_dim + head_dim / 2 + i],
// for p < positions.
std::vector<float> rope_table(uint32_t positions, uint32_t head_dim, double theta);

}  // namespace kipp::cuda
