// Normally distributed test values from a seeded generator, shared by the unit tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace kipp::test_support {

inline std::vector<float> normal_values(size_t count, uint32_t seed, float stddev) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> values(count);
  for (float& value : values) value = normal(generator);
  return values;
}

}  // namespace kipp::test_support
