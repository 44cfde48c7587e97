// The one internal grammar form every front end compiles to: rules of alternatives, each a
// sequence of elements over bytes (byte sets, rule references, counted repetitions of a rule,
// and JSON string characters as a primitive so the matcher can count them and take the fast
// path inside strings). Built through GrammarBuilder, which checks the grammar (no left
// recursion, no repetition of something that may match nothing, a size limit) and precomputes
// the shortest completion from every element.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"

namespace kipp::grammar {

inline constexpr uint32_t kUnbounded = UINT32_MAX;     // a repetition or string without an upper bound
inline constexpr uint32_t kNoCompletion = UINT32_MAX;  // min bytes of something that cannot complete

enum class ElementKind : uint8_t {
  End,     // closes an alternative
  Bytes,   // one byte from byte_sets[arg]
  Ref,     // rule arg
  Repeat,  // rule arg, repeated min..max times
  String,  // min..max JSON string characters (plain UTF-8 or escapes), without the quotes
};

struct Element {
  ElementKind kind = ElementKind::End;
  uint32_t arg = 0;
  uint32_t min = 0;
  uint32_t max = 0;
};

using ByteSet = std::array<uint64_t, 4>;
inline bool byte_set_has(const ByteSet& set, uint8_t b) { return (set[b >> 6] >> (b & 63)) & 1; }
inline void byte_set_add(ByteSet& set, uint8_t b) { set[b >> 6] |= uint64_t{1} << (b & 63); }

uint32_t saturating_add(uint32_t a, uint32_t b);
uint32_t saturating_mul(uint32_t a, uint32_t b);

class Grammar {
 public:
  std::vector<Element> elements;             // alternatives back to back, each closed by End
  std::vector<std::vector<uint32_t>> rules;  // rule -> the element index each alternative starts at
  std::vector<std::string> rule_names;       // for error messages
  std::vector<ByteSet> byte_sets;
  std::vector<uint32_t> rule_min;  // shortest match of each rule in bytes
  std::vector<uint32_t> tail_min;  // shortest match from each element to its End
  uint32_t root = 0;
};

// Builds a Grammar. Rules are made first (so references may point forward or recurse), then
// given alternatives; finish() checks and precomputes.
class GrammarBuilder {
 public:
  struct Item {
    ElementKind kind;
    uint32_t arg = 0;
    uint32_t min = 0;
    uint32_t max = 0;
  };
  using Sequence = std::vector<Item>;

  uint32_t new_rule(std::string name);
  void add_alternative(uint32_t rule, const Sequence& sequence);
  size_t size() const { return elements_; }  // elements so far, for size limits

  // Sequence items.
  Item bytes(const ByteSet& set);
  Item byte(uint8_t b);
  static Item ref(uint32_t rule) { return {ElementKind::Ref, rule}; }
  static Item repeat(uint32_t rule, uint32_t min, uint32_t max) { return {ElementKind::Repeat, rule, min, max}; }
  static Item string_chars(uint32_t min, uint32_t max) { return {ElementKind::String, 0, min, max}; }
  void append_literal(Sequence& sequence, std::string_view text);
  // A rule matching exactly `text`, or one with one alternative per text.
  uint32_t literal_rule(std::string name, std::string_view text);
  // Wraps a sequence in a rule of its own (for repetition or optional parts).
  uint32_t sequence_rule(std::string name, const Sequence& sequence);
  uint32_t empty_rule();  // matches nothing at all (an unsatisfiable schema)

  Expected<GrammarPtr> finish(uint32_t root);

 private:
  std::vector<std::vector<Sequence>> alternatives_;
  std::vector<std::string> names_;
  std::vector<ByteSet> sets_;
  size_t elements_ = 0;
};

// A grammar's size limit, in elements: front ends stop with an error beyond it.
inline constexpr size_t kMaxGrammarElements = size_t{1} << 21;

}  // namespace kipp::grammar
