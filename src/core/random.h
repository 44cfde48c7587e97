// Counter-based random numbers: each value is a pure function of (key, index), so results do
// not depend on how work is split across threads or on where a resumed run picks up.
#pragma once

#include <cstdint>

namespace kipp {

// splitmix64's finalizer: a bijective 64-bit mix with good avalanche.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline uint64_t counter_random(uint64_t key, uint64_t index) { return mix64(key ^ mix64(index)); }

// Uniform in (0, 1] from the top 53 bits.
inline double uniform_open(uint64_t bits) { return double((bits >> 11) + 1) * 0x1.0p-53; }

}  // namespace kipp
