// A strict reader for the .npy files the PyTorch reference writes (numpy.save, format 1.0-3.0):
// little-endian float32 or int64, C order. Anything else is refused rather than converted, so a
// change on the Python side shows up as an error instead of silently different numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace kipp::npy {

template <typename T>
struct Array {
  std::vector<size_t> shape;
  std::vector<T> values;  // row-major
};

Expected<Array<float>> read_float32(const std::string& path);
Expected<Array<int64_t>> read_int64(const std::string& path);

}  // namespace kipp::npy
