#include "unit/grammar/grammar_test_support.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "tokenizer/tokenizer.h"
#include "unit/helpers/tokenizer_fixtures.h"

namespace kipp::grammar::testing {

namespace {

std::shared_ptr<const TokenVocabulary> byte_vocabulary() {
  static const auto vocabulary = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    bytes.push_back("");
    return TokenVocabulary::build(bytes, std::vector<bool>(257, false), {256});
  }();
  return vocabulary;
}

size_t code_points(const std::string& text) {
  size_t n = 0;
  for (const char c : text) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

bool matches(const GrammarPtr& grammar, std::string_view text) {
  Matcher matcher(grammar, byte_vocabulary());
  return matcher.accept_bytes(text).ok() && matcher.accepting();
}

GrammarPtr schema_grammar(const std::string& schema) {
  auto grammar = compile_json_schema(schema);
  EXPECT_TRUE(grammar.ok()) << schema << ": " << (grammar.ok() ? "" : grammar.message());
  if (!grammar.ok()) throw std::runtime_error(grammar.message());
  return *grammar;
}

std::shared_ptr<const TokenVocabulary> qwen_vocabulary() {
  static const std::shared_ptr<const TokenVocabulary> vocabulary = []() -> std::shared_ptr<const TokenVocabulary> {
    auto metadata = kipp::testing::qwen_tokenizer_metadata(KIPP_SOURCE_DIR);
    if (!metadata.ok()) return nullptr;
    auto tokenizer = Tokenizer::create(*metadata);
    if (!tokenizer.ok()) return nullptr;
    std::vector<std::string> bytes;
    std::vector<bool> excluded;
    for (uint32_t id = 0; id < tokenizer->vocab_size(); ++id) {
      auto piece = tokenizer->token_to_bytes(id);
      bytes.push_back(piece.ok() ? *piece : "");
      excluded.push_back(!piece.ok() || tokenizer->is_special_token(id));
    }
    return TokenVocabulary::build(bytes, excluded, {kImEnd, 151643});
  }();
  if (!vocabulary) throw std::runtime_error("the real Qwen3 tokenizer is required and could not be loaded");
  return vocabulary;
}

std::string violation(const nlohmann::json& schema, const nlohmann::json& value, const nlohmann::json& root) {
  using nlohmann::json;
  if (schema.is_boolean()) return schema.get<bool>() ? "" : "false schema";
  if (schema.contains("$ref")) {
    std::string ref = schema["$ref"].get<std::string>().substr(1);
    return violation(ref.empty() ? root : root.at(json::json_pointer(ref)), value, root);
  }
  if (schema.contains("anyOf") || schema.contains("oneOf")) {
    const json& list = schema.contains("anyOf") ? schema["anyOf"] : schema["oneOf"];
    int matched = 0;
    for (const json& s : list) matched += violation(s, value, root).empty();
    if (matched == 0) return "no alternative matches " + value.dump();
    if (schema.contains("oneOf") && matched > 1) return "several oneOf alternatives match " + value.dump();
    return "";
  }
  if (schema.contains("type")) {
    json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    bool ok = false;
    for (const json& t : types) {
      const std::string name = t.get<std::string>();
      ok = ok || (name == "null" && value.is_null()) || (name == "boolean" && value.is_boolean()) ||
           (name == "object" && value.is_object()) || (name == "array" && value.is_array()) ||
           (name == "string" && value.is_string()) || (name == "number" && value.is_number()) ||
           (name == "integer" &&
            (value.is_number_integer() ||
             (value.is_number_float() &&
              value.get<double>() == static_cast<double>(static_cast<int64_t>(value.get<double>())))));
    }
    if (!ok) return "wrong type for " + value.dump();
  }
  if (schema.contains("const") && json(schema["const"]) != value) return "not the const: " + value.dump();
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& v : schema["enum"]) found = found || v == value;
    if (!found) return "not in the enum: " + value.dump();
  }
  if (value.is_string()) {
    const size_t n = code_points(value.get<std::string>());
    if (schema.contains("minLength") && n < schema["minLength"].get<size_t>()) return "too short: " + value.dump();
    if (schema.contains("maxLength") && n > schema["maxLength"].get<size_t>()) return "too long: " + value.dump();
  }
  if (value.is_number()) {
    const double v = value.get<double>();
    if (schema.contains("minimum") && v < schema["minimum"].get<double>()) return "below minimum: " + value.dump();
    if (schema.contains("maximum") && v > schema["maximum"].get<double>()) return "above maximum: " + value.dump();
    if (schema.contains("exclusiveMinimum") && v <= schema["exclusiveMinimum"].get<double>())
      return "not above: " + value.dump();
    if (schema.contains("exclusiveMaximum") && v >= schema["exclusiveMaximum"].get<double>())
      return "not below: " + value.dump();
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>()) return "too few items";
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>()) return "too many items";
    const size_t prefix = schema.contains("prefixItems") ? schema["prefixItems"].size() : 0;
    for (size_t i = 0; i < value.size(); ++i) {
      const json* item =
          i < prefix ? &schema["prefixItems"][i] : (schema.contains("items") ? &schema["items"] : nullptr);
      if (item)
        if (std::string why = violation(*item, value[i], root); !why.empty())
          return "[" + std::to_string(i) + "]: " + why;
    }
  }
  if (value.is_object()) {
    if (schema.contains("required"))
      for (const json& name : schema["required"])
        if (!value.contains(name.get<std::string>())) return "missing " + name.get<std::string>();
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (schema.contains("properties") && schema["properties"].contains(it.key())) {
        if (std::string why = violation(schema["properties"][it.key()], it.value(), root); !why.empty())
          return it.key() + ": " + why;
      } else if (schema.contains("additionalProperties") && schema["additionalProperties"] == false) {
        return "additional property " + it.key();
      }
    }
  }
  return "";
}

}  // namespace kipp::grammar::testing
