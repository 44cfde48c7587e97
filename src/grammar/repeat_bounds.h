// The bounds of a counted repetition, `{m}`, `{m,}` or `{m,n}`, as GBNF and the JSON Schema
// pattern subset write them; each front end turns the errors into its own messages.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar/grammar_ir.h"

namespace kipp::grammar {

struct RepeatBounds {
  uint32_t min = 0;
  uint32_t max = 0;  // kUnbounded for `{m,}`
};

enum class RepeatBoundsError { kNone, kMissingMin, kUnclosed, kMaxBelowMin };

// Reads the digits at `pos` (advancing past them); false when there are none. Counts above 2^20
// read as 2^20, far beyond what a grammar can hold, so that no count overflows.
inline bool read_repeat_count(std::string_view text, size_t& pos, uint32_t& out) {
  const size_t start = pos;
  uint64_t v = 0;
  for (; pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])); ++pos)
    v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(text[pos] - '0'), uint64_t{1} << 20);
  out = static_cast<uint32_t>(v);
  return pos > start;
}

// Reads the bounds from `pos`, just past the '{', through the '}'. `skip()` steps `pos` over what
// may stand between the parts (GBNF: spaces and comments; patterns: nothing). With `optional_min`
// a missing m reads as 0 when a ',' follows (GBNF's `{,n}` and `{,}`). On success `pos` is past
// the '}'; on an error it is where the error was found (past the '}' for kMaxBelowMin).
template <typename Skip>
RepeatBoundsError read_repeat_bounds(std::string_view text, size_t& pos, bool optional_min, Skip&& skip,
                                     RepeatBounds& out) {
  skip();
  const bool has_min = read_repeat_count(text, pos, out.min);
  if (!has_min && !optional_min) return RepeatBoundsError::kMissingMin;
  skip();
  out.max = out.min;
  if (pos < text.size() && text[pos] == ',') {
    ++pos;
    skip();
    if (!read_repeat_count(text, pos, out.max)) out.max = kUnbounded;
    skip();
  } else if (!has_min) {
    return RepeatBoundsError::kMissingMin;
  }
  if (pos >= text.size() || text[pos] != '}') return RepeatBoundsError::kUnclosed;
  ++pos;
  return out.max < out.min ? RepeatBoundsError::kMaxBelowMin : RepeatBoundsError::kNone;
}

}  // namespace kipp::grammar
