// JSON strings whose value matches a regular expression (JSON Schema "pattern", ECMAScript
// with the u flag) or a "format", and UTF-8 byte alternatives for sets of code points.
//
// The regular expression subset: literal characters, ".", classes [...] and [^...] with ranges,
// escapes \d \D \w \W \s \S \n \r \t \f \v \0 \xHH \uHHHH \u{H...} and escaped syntax
// characters, groups (...) (?:...) (?<name>...), alternation |, quantifiers ? * + {m} {m,}
// {m,n} (lazy forms match the same strings), ^ at the start and $ at the end. Without ^ (or $)
// the match may start (or end) anywhere in the string, as JSON Schema specifies. Backreferences,
// lookaround, word boundaries and anchors elsewhere are errors. Characters are written raw in
// the JSON string except '"', '\' and control characters, which are escaped (\" \\ \n \r \t
// \b \f, else \u00XX).
//
// Formats: date (with leap years), time and date-time (seconds, optional fraction of up to six
// digits, "Z" or a +hh:mm offset), uuid (lowercase hex), email (the common dot-atom form).
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "grammar/grammar_ir.h"

namespace kipp::grammar {

// Sorted, disjoint, inclusive code point ranges.
using CodePoints = std::vector<std::pair<uint32_t, uint32_t>>;

// One alternative of `rule` per UTF-8 byte-range sequence of the set (surrogates left out).
void add_utf8_alternatives(GrammarBuilder& builder, uint32_t rule, const CodePoints& set);

// The rule of a JSON string (with its quotes).
Expected<uint32_t> pattern_rule(GrammarBuilder& builder, std::string_view pattern);
Expected<uint32_t> format_rule(GrammarBuilder& builder, std::string_view format);

}  // namespace kipp::grammar
