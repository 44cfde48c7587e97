// Shared by the grammar tests: whole-string acceptance through a matcher, the real Qwen3
// vocabulary, and a small JSON Schema validator for the subset the tests use, written
// independently of the grammar compiler (it checks values, not text).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace kipp::grammar::testing {

// True when the grammar accepts exactly `text` (as a whole).
bool matches(const GrammarPtr& grammar, std::string_view text);
GrammarPtr schema_grammar(const std::string& schema);  // fails the test on a compile error

// The real Qwen3 vocabulary: control tokens excluded, <|im_end|> and <|endoftext|> the end tokens.
std::shared_ptr<const TokenVocabulary> qwen_vocabulary();
inline constexpr uint32_t kImEnd = 151645;

// Empty when `value` satisfies `schema` (the subset: type, enum, const, properties, required,
// additionalProperties false, items, prefixItems, minItems, maxItems, minLength, maxLength,
// minimum, maximum, exclusiveMinimum, exclusiveMaximum, anyOf, oneOf, $ref), else why not.
std::string violation(const nlohmann::json& schema, const nlohmann::json& value, const nlohmann::json& root);

}  // namespace kipp::grammar::testing
