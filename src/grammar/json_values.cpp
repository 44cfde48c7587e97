#include "grammar/json_values.h"

#include "grammar/json_numbers.h"

namespace kipp::grammar {

void JsonRules::build_any() {
  using B = GrammarBuilder;
  const uint32_t value = b_.new_rule("value");
  const uint32_t object = b_.new_rule("object");
  const uint32_t array = b_.new_rule("array");
  value_ = value;
  object_ = object;
  const uint32_t key = string(0, kUnbounded);
  B::Sequence member{B::ref(key), b_.byte(':'), B::ref(value)};
  const uint32_t member_rule = b_.sequence_rule("member", member);
  const uint32_t more_members = b_.sequence_rule("members", {b_.byte(','), B::ref(member_rule)});
  b_.add_alternative(object, {b_.byte('{'), b_.byte('}')});
  b_.add_alternative(object, {b_.byte('{'), B::ref(member_rule), B::repeat(more_members, 0, kUnbounded), b_.byte('}')});
  const uint32_t more_values = b_.sequence_rule("values", {b_.byte(','), B::ref(value)});
  b_.add_alternative(array, {b_.byte('['), b_.byte(']')});
  b_.add_alternative(array, {b_.byte('['), B::ref(value), B::repeat(more_values, 0, kUnbounded), b_.byte(']')});
  const uint32_t number = number_rule(b_, std::nullopt, std::nullopt).value();  // unbounded: cannot fail
  for (const uint32_t rule : {object, array, key, number}) b_.add_alternative(value, {B::ref(rule)});
  for (const char* word : {"true", "false", "null"}) {
    B::Sequence seq;
    b_.append_literal(seq, word);
    b_.add_alternative(value, seq);
  }
}

uint32_t JsonRules::any_value() {
  if (!value_) build_any();
  return *value_;
}

uint32_t JsonRules::any_object() {
  if (!object_) build_any();
  return *object_;
}

uint32_t JsonRules::string(uint32_t min_chars, uint32_t max_chars) {
  auto [it, added] = strings_.try_emplace({min_chars, max_chars}, 0);
  if (!added) return it->second;
  return it->second = b_.sequence_rule(
             "string", {b_.byte('"'), GrammarBuilder::string_chars(min_chars, max_chars), b_.byte('"')});
}

uint32_t JsonRules::literal(std::string_view compact_json) { return b_.literal_rule("literal", compact_json); }

}  // namespace kipp::grammar
