// Test helper: reference decoders for the small float formats, written from their definitions
// (not from Kipp's own conversions) so tests can check those conversions against them.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace kipp::testing {

// fp16 bits -> value, from the IEEE 754 binary16 definition.
inline double decode_f16(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return (bits & 0x8000) ? -magnitude : magnitude;
}

}  // namespace kipp::testing
