// Rules for compact JSON shared by the JSON front ends: any value, any object, strings of a
// bounded length in characters, and fixed values rendered compactly.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>

#include "grammar/grammar_ir.h"

namespace kipp::grammar {

class JsonRules {
 public:
  explicit JsonRules(GrammarBuilder& builder) : b_(builder) {}

  uint32_t any_value();
  uint32_t any_object();
  uint32_t string(uint32_t min_chars, uint32_t max_chars);  // with its quotes
  // A fixed value, given as its compact JSON text.
  uint32_t literal(std::string_view compact_json);
  GrammarBuilder& builder() { return b_; }

 private:
  void build_any();
  GrammarBuilder& b_;
  std::optional<uint32_t> value_, object_;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> strings_;
};

}  // namespace kipp::grammar
