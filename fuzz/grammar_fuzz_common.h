// Shared by the grammar fuzz targets: drives a matcher over a grammar that compiled, on a
// byte vocabulary (every byte a token, plus an end token), choosing tokens from the mask with
// the input's bytes, and checks the matcher's promises: a mask is never empty before done(),
// every token it allows is accepted, the end token only when the output is complete.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace kipp::fuzzing {

inline void check(bool condition) {
  if (!condition) __builtin_trap();
}

inline void drive_matcher(const grammar::GrammarPtr& g, const uint8_t* choices, size_t size) {
  static const auto vocabulary = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    bytes.push_back("");
    return grammar::TokenVocabulary::build(bytes, std::vector<bool>(257, false), {256});
  }();
  grammar::Matcher matcher(g, vocabulary);
  std::vector<uint32_t> mask(9);
  const uint32_t budget = 48;
  for (uint32_t step = 0; step < budget; ++step) {
    matcher.fill_mask(mask, step % 2 == 0 ? budget - step : UINT32_MAX);
    std::vector<uint32_t> allowed;
    for (uint32_t id = 0; id < 257; ++id)
      if ((mask[id / 32] >> (id % 32)) & 1) allowed.push_back(id);
    check(!allowed.empty());
    const uint32_t id = allowed[(step < size ? choices[step] : step) % allowed.size()];
    if (id == 256) {
      check(matcher.accepting());
      return;
    }
    check(matcher.accept(id).ok());
    check(!matcher.done() || matcher.accepting());
  }
}

}  // namespace kipp::fuzzing
