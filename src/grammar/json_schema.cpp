// JSON Schema to a grammar of compact JSON (no insignificant whitespace).
//
// Supported subset (anything else is an error naming the keyword and its JSON Pointer):
// - type: "null", "boolean", "integer", "number", "string", "array", "object", or an array of
//   them (["string", "null"]). Without "type", the types are inferred from the keywords present
//   (object, array, string or number keywords); a schema with none of them allows any value.
// - enum, const: any JSON values, written compactly; with "type" only values of those types.
// - anyOf; oneOf when its alternatives are disjoint by type or by their enum/const values;
//   allOf with exactly one schema; $ref to "#", "#/$defs/...", "#/definitions/..." (or any
//   JSON Pointer in the document; recursion allowed). $ref, anyOf, oneOf and allOf take no
//   sibling keywords other than annotations and $defs/definitions.
// - object: properties (written in the schema's order), required (required ones always,
//   optional ones may be left out), additionalProperties. Objects are closed: additionalProperties
//   false and absent both mean no other property (absent: a required name missing from
//   properties may hold any value). additionalProperties true or a schema is supported only
//   without properties and required (a map: any keys, values of that schema).
// - array: items (a schema, or false), prefixItems, items as an array with additionalItems (older
//   drafts), minItems, maxItems.
// - string: minLength, maxLength (in Unicode characters, an escape counting as one); pattern
//   (a regular expression subset, see string_patterns.h); format date, time, date-time, uuid,
//   email. pattern, format and the length bounds do not combine.
// - integer, number: minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, or the
//   older boolean exclusiveMinimum/exclusiveMaximum), enforced exactly in plain decimal notation
//   (see json_numbers.h).
// - Ignored annotations: title, description, $schema, $id, examples, default, $comment,
//   deprecated, readOnly, writeOnly.
// Nesting is limited to 64 levels and the grammar to kMaxGrammarElements elements.
#include <array>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "grammar/grammar_ir.h"
#include "grammar/json_numbers.h"
#include "grammar/json_schema.h"
#include "grammar/json_values.h"
#include "grammar/string_patterns.h"

namespace kipp::grammar {

namespace {

using json = nlohmann::ordered_json;
using B = GrammarBuilder;

constexpr int kMaxDepth = 64;

const std::set<std::string> kAnnotations = {"title",   "description", "$schema",    "$id",      "examples",
                                            "default", "$comment",    "deprecated", "readOnly", "writeOnly"};
const std::set<std::string> kContainers = {"$defs", "definitions"};
const std::set<std::string> kObjectKeys = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayKeys = {"items", "prefixItems", "additionalItems", "minItems", "maxItems"};
const std::set<std::string> kStringKeys = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberKeys = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::set<std::string> kCombinators = {"$ref", "anyOf", "oneOf", "allOf"};
const std::set<std::string> kValueKeys = {"type", "enum", "const"};

enum TypeBit : uint8_t {
  kNull = 1,
  kBoolean = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kInteger = 32,
  kFraction = 64,  // a number that is not an integer
  kAnyType = 127,
};

const std::array<std::pair<const char*, uint8_t>, 7> kTypeNames = {{{"null", kNull},
                                                                    {"boolean", kBoolean},
                                                                    {"object", kObject},
                                                                    {"array", kArray},
                                                                    {"string", kString},
                                                                    {"integer", kInteger},
                                                                    {"number", kInteger | kFraction}}};

uint8_t type_of(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return kNull;
    case json::value_t::boolean: return kBoolean;
    case json::value_t::object: return kObject;
    case json::value_t::array: return kArray;
    case json::value_t::string: return kString;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return kInteger;
    case json::value_t::number_float: {
      const double v = value.get<double>();
      return std::floor(v) == v ? kInteger : kFraction;
    }
    default: return 0;
  }
}

std::string escape_pointer(const std::string& key) {
  std::string out;
  for (const char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string at(const std::string& path) { return path.empty() ? "/" : path; }

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& builder, const json& document) : b_(builder), rules_(builder), document_(document) {}

  Expected<uint32_t> compile(const json& schema, const std::string& path, int depth) {
    if (depth > kMaxDepth) return make_error("the schema is nested deeper than 64 levels at " + at(path));
    if (b_.size() > kMaxGrammarElements) return make_error("the schema's grammar is too large at " + at(path));
    if (schema.is_boolean()) return schema.get<bool>() ? rules_.any_value() : b_.empty_rule();
    if (!schema.is_object()) return make_error("the schema at " + at(path) + " must be an object or a boolean");
    std::set<std::string> validation;
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      const std::string& key = it.key();
      if (kAnnotations.count(key) || kContainers.count(key)) continue;
      if (!kObjectKeys.count(key) && !kArrayKeys.count(key) && !kStringKeys.count(key) && !kNumberKeys.count(key) &&
          !kCombinators.count(key) && !kValueKeys.count(key))
        return make_error("unsupported JSON Schema keyword '" + key + "' at " + at(path));
      validation.insert(key);
    }
    for (const std::string& combinator : kCombinators) {
      if (!validation.count(combinator)) continue;
      if (validation.size() > 1) {
        for (const std::string& other : validation)
          if (other != combinator)
            return make_error("keyword '" + other + "' alongside '" + combinator + "' at " + at(path) +
                              " is not supported");
      }
      if (combinator == "$ref") return reference(schema["$ref"], path + "/$ref", depth);
      return combine(combinator, schema[combinator], path + "/" + combinator, depth);
    }
    KIPP_ASSIGN_OR_RETURN(const uint8_t types, declared_types(schema, path));
    if (schema.contains("enum") || schema.contains("const")) return values(schema, types, validation, path);
    const uint32_t rule = b_.new_rule(path);
    if (types & kNull) b_.add_alternative(rule, {B::ref(b_.literal_rule("null", "null"))});
    if (types & kBoolean) {
      b_.add_alternative(rule, {B::ref(b_.literal_rule("true", "true"))});
      b_.add_alternative(rule, {B::ref(b_.literal_rule("false", "false"))});
    }
    if (types & (kInteger | kFraction)) {
      KIPP_ASSIGN_OR_RETURN(const uint32_t number, numeric(schema, (types & kFraction) != 0, path));
      b_.add_alternative(rule, {B::ref(number)});
    }
    if (types & kString) {
      KIPP_ASSIGN_OR_RETURN(const uint32_t string, string_schema(schema, path));
      b_.add_alternative(rule, {B::ref(string)});
    }
    if (types & kArray) {
      KIPP_ASSIGN_OR_RETURN(const uint32_t array, array_schema(schema, path, depth));
      b_.add_alternative(rule, {B::ref(array)});
    }
    if (types & kObject) {
      KIPP_ASSIGN_OR_RETURN(const uint32_t object, object_schema(schema, path, depth));
      b_.add_alternative(rule, {B::ref(object)});
    }
    return rule;
  }

  // The JSON types a schema may produce (for oneOf's disjointness), following references.
  Expected<uint8_t> possible_types(const json& schema, const std::string& path, int depth) {
    if (depth > kMaxDepth) return make_error("the schema is nested deeper than 64 levels at " + at(path));
    if (schema.is_boolean()) return static_cast<uint8_t>(schema.get<bool>() ? kAnyType : 0);
    if (!schema.is_object()) return make_error("the schema at " + at(path) + " must be an object or a boolean");
    if (schema.contains("$ref")) {
      KIPP_ASSIGN_OR_RETURN(const json* target, resolve(schema["$ref"], path + "/$ref"));
      return possible_types(*target, path + "/$ref", depth + 1);
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      if (!schema.contains(key) || !schema[key].is_array()) continue;
      uint8_t types = 0;
      for (size_t i = 0; i < schema[key].size(); ++i) {
        KIPP_ASSIGN_OR_RETURN(const uint8_t t,
                              possible_types(schema[key][i], path + "/" + key + "/" + std::to_string(i), depth + 1));
        types |= t;
      }
      return types;
    }
    KIPP_ASSIGN_OR_RETURN(uint8_t types, declared_types(schema, path));
    for (const char* key : {"enum", "const"}) {
      if (!schema.contains(key)) continue;
      uint8_t value_types = 0;
      if (std::string(key) == "const")
        value_types = type_of(schema[key]);
      else if (schema[key].is_array())
        for (const json& v : schema[key]) value_types |= type_of(v);
      types &= value_types;
    }
    return types;
  }

 private:
  Expected<const json*> resolve(const json& ref, const std::string& path) {
    if (!ref.is_string()) return make_error("'$ref' at " + at(path) + " must be a string");
    const std::string text = ref.get<std::string>();
    if (text.empty() || text[0] != '#')
      return make_error("'$ref' at " + at(path) + " must point into this schema ('#/$defs/...'), got '" + text + "'");
    const json* node = &document_;
    size_t i = 1;
    if (i < text.size() && text[i] != '/')
      return make_error("'$ref' at " + at(path) + " is not a JSON Pointer: '" + text + "'");
    while (i < text.size()) {
      size_t next = text.find('/', i + 1);
      if (next == std::string::npos) next = text.size();
      std::string token;
      for (size_t k = i + 1; k < next; ++k) {
        if (text[k] == '~' && k + 1 < next && (text[k + 1] == '0' || text[k + 1] == '1')) {
          token += text[k + 1] == '0' ? '~' : '/';
          ++k;
        } else {
          token += text[k];
        }
      }
      if (node->is_object() && node->contains(token)) {
        node = &(*node)[token];
      } else if (node->is_array() && !token.empty() && token.find_first_not_of("0123456789") == std::string::npos &&
                 token.size() < 10 && std::stoul(token) < node->size()) {
        node = &(*node)[std::stoul(token)];
      } else {
        return make_error("'$ref' at " + at(path) + " points to nothing: '" + text + "'");
      }
      i = next;
    }
    return node;
  }

  Expected<uint32_t> reference(const json& ref, const std::string& path, int depth) {
    KIPP_ASSIGN_OR_RETURN(const json* target, resolve(ref, path));
    const std::string key = ref.get<std::string>();
    if (auto it = refs_.find(key); it != refs_.end()) return it->second;
    // The rule exists before its body so that the target may refer back to it.
    const uint32_t rule = b_.new_rule(key);
    refs_[key] = rule;
    KIPP_ASSIGN_OR_RETURN(const uint32_t body, compile(*target, path, depth + 1));
    b_.add_alternative(rule, {B::ref(body)});
    return rule;
  }

  Expected<uint32_t> combine(const std::string& keyword, const json& list, const std::string& path, int depth) {
    if (!list.is_array() || list.empty())
      return make_error("'" + keyword + "' at " + at(path) + " must be a non-empty array");
    if (keyword == "allOf") {
      if (list.size() != 1) return make_error("'allOf' at " + at(path) + " with more than one schema is not supported");
      return compile(list[0], path + "/0", depth + 1);
    }
    if (keyword == "oneOf") KIPP_RETURN_IF_ERROR(check_disjoint(list, path, depth));
    const uint32_t rule = b_.new_rule(path);
    for (size_t i = 0; i < list.size(); ++i) {
      KIPP_ASSIGN_OR_RETURN(const uint32_t alt, compile(list[i], path + "/" + std::to_string(i), depth + 1));
      b_.add_alternative(rule, {B::ref(alt)});
    }
    return rule;
  }

  Status check_disjoint(const json& list, const std::string& path, int depth) {
    std::vector<uint8_t> types;
    for (size_t i = 0; i < list.size(); ++i) {
      KIPP_ASSIGN_OR_RETURN(const uint8_t t, possible_types(list[i], path + "/" + std::to_string(i), depth + 1));
      types.push_back(t);
    }
    auto fixed_values = [&](const json& s) -> std::optional<std::vector<json>> {
      if (!s.is_object()) return std::nullopt;
      if (s.contains("const")) return std::vector<json>{s["const"]};
      if (s.contains("enum") && s["enum"].is_array()) return s["enum"].get<std::vector<json>>();
      return std::nullopt;
    };
    for (size_t i = 0; i < list.size(); ++i) {
      for (size_t j = i + 1; j < list.size(); ++j) {
        if ((types[i] & types[j]) == 0) continue;
        const auto a = fixed_values(list[i]), c = fixed_values(list[j]);
        bool disjoint = a && c;
        if (disjoint)
          for (const json& x : *a)
            for (const json& y : *c)
              disjoint = disjoint && nlohmann::json::parse(x.dump()) != nlohmann::json::parse(y.dump());
        if (!disjoint)
          return make_error("'oneOf' at " + at(path) + ": alternatives " + std::to_string(i) + " and " +
                            std::to_string(j) +
                            " may both match (only alternatives disjoint by type or value are supported; use anyOf)");
      }
    }
    return ok_status();
  }

  static bool has_any(const json& schema, const std::set<std::string>& keys) {
    for (const std::string& key : keys)
      if (schema.contains(key)) return true;
    return false;
  }

  Expected<uint8_t> declared_types(const json& schema, const std::string& path) {
    if (!schema.contains("type")) {
      uint8_t types = 0;
      if (has_any(schema, kObjectKeys)) types |= kObject;
      if (has_any(schema, kArrayKeys)) types |= kArray;
      if (has_any(schema, kStringKeys)) types |= kString;
      if (has_any(schema, kNumberKeys)) types |= kInteger | kFraction;
      return static_cast<uint8_t>(types ? types : uint8_t{kAnyType});
    }
    const json& type = schema["type"];
    std::vector<json> names = type.is_array() ? type.get<std::vector<json>>() : std::vector<json>{type};
    if (names.empty()) return make_error("'type' at " + at(path) + " must not be empty");
    uint8_t types = 0;
    for (const json& name : names) {
      uint8_t bit = 0;
      for (const auto& [text, value] : kTypeNames)
        if (name.is_string() && name.get<std::string>() == text) bit = value;
      if (bit == 0) return make_error("'type' at " + at(path) + " names an unknown type: " + name.dump());
      types |= bit;
    }
    return types;
  }

  Expected<uint32_t> values(const json& schema, uint8_t types, const std::set<std::string>& validation,
                            const std::string& path) {
    for (const std::string& key : validation)
      if (!kValueKeys.count(key))
        return make_error("keyword '" + key + "' alongside enum/const at " + at(path) + " is not supported");
    std::vector<json> list;
    if (schema.contains("enum")) {
      if (!schema["enum"].is_array()) return make_error("'enum' at " + at(path) + " must be an array");
      list = schema["enum"].get<std::vector<json>>();
    }
    if (schema.contains("const")) {
      const json& c = schema["const"];
      if (schema.contains("enum")) {
        std::erase_if(list, [&](const json& v) { return v != c; });
      } else {
        list = {c};
      }
    }
    const uint32_t rule = b_.new_rule(path);
    for (const json& v : list)
      if (type_of(v) & types) b_.add_alternative(rule, {B::ref(rules_.literal(v.dump()))});
    return rule;
  }

  static Expected<uint32_t> count(const json& schema, const char* key, const std::string& path, uint32_t fallback) {
    if (!schema.contains(key)) return fallback;
    const json& v = schema[key];
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0))
      return static_cast<uint32_t>(std::min<uint64_t>(v.get<uint64_t>(), kUnbounded));
    if (v.is_number_float() && v.get<double>() >= 0 && std::floor(v.get<double>()) == v.get<double>())
      return static_cast<uint32_t>(std::min<double>(v.get<double>(), kUnbounded));
    return make_error("'" + std::string(key) + "' at " + at(path) + " must be a non-negative integer");
  }

  Expected<uint32_t> string_schema(const json& schema, const std::string& path) {
    KIPP_ASSIGN_OR_RETURN(const uint32_t min, count(schema, "minLength", path, 0));
    KIPP_ASSIGN_OR_RETURN(const uint32_t max, count(schema, "maxLength", path, kUnbounded));
    if (min > max) return make_error("'minLength' at " + at(path) + " is above 'maxLength'");
    const bool lengths = schema.contains("minLength") || schema.contains("maxLength");
    if (schema.contains("pattern") || schema.contains("format")) {
      const char* key = schema.contains("pattern") ? "pattern" : "format";
      if (lengths || (schema.contains("pattern") && schema.contains("format")))
        return make_error(
            "'" + std::string(key) + "' at " + at(path) +
            " together with other string keywords (minLength, maxLength, pattern, format) is not supported");
      if (!schema[key].is_string())
        return make_error("'" + std::string(key) + "' at " + at(path) + " must be a string");
      auto rule = std::string(key) == "pattern" ? pattern_rule(b_, schema[key].get<std::string>())
                                                : format_rule(b_, schema[key].get<std::string>());
      if (!rule.ok()) return make_error("'" + std::string(key) + "' at " + at(path) + ": " + rule.message());
      return rule;
    }
    return rules_.string(min, max);
  }

  Expected<std::optional<NumberBound>> bound(const json& schema, const char* key, const char* exclusive_key, bool lower,
                                             const std::string& path) {
    std::optional<NumberBound> result;
    auto decimal = [&](const json& v, const char* name) -> Expected<Decimal> {
      if (v.is_number_integer()) return decimal_from_integer(v.get<int64_t>());
      if (v.is_number_unsigned()) {
        Decimal d;
        d.int_digits = std::to_string(v.get<uint64_t>());
        return d;
      }
      if (v.is_number_float() && std::isfinite(v.get<double>())) return decimal_from_double(v.get<double>());
      return make_error("'" + std::string(name) + "' at " + at(path) + " must be a finite number");
    };
    bool exclusive_flag = false;
    if (schema.contains(exclusive_key)) {
      const json& e = schema[exclusive_key];
      if (e.is_boolean()) {
        exclusive_flag = e.get<bool>();
      } else {
        KIPP_ASSIGN_OR_RETURN(Decimal d, decimal(e, exclusive_key));
        result = NumberBound{d, true};
      }
    }
    if (schema.contains(key)) {
      KIPP_ASSIGN_OR_RETURN(Decimal d, decimal(schema[key], key));
      NumberBound candidate{d, exclusive_flag};
      if (!result) {
        result = candidate;
      } else {
        // Both given: the tighter one holds.
        const double a = schema[key].get<double>(), c = schema[exclusive_key].get<double>();
        if (lower ? a > c : a < c) result = candidate;
      }
    }
    return result;
  }

  Expected<uint32_t> numeric(const json& schema, bool fractions, const std::string& path) {
    KIPP_ASSIGN_OR_RETURN(const auto low, bound(schema, "minimum", "exclusiveMinimum", true, path));
    KIPP_ASSIGN_OR_RETURN(const auto high, bound(schema, "maximum", "exclusiveMaximum", false, path));
    auto rule = fractions ? number_rule(b_, low, high) : integer_rule(b_, low, high);
    if (!rule.ok()) return make_error(rule.message() + " at " + at(path));
    return rule;
  }

  Expected<uint32_t> array_schema(const json& schema, const std::string& path, int depth) {
    KIPP_ASSIGN_OR_RETURN(const uint32_t min, count(schema, "minItems", path, 0));
    KIPP_ASSIGN_OR_RETURN(uint32_t max, count(schema, "maxItems", path, kUnbounded));
    if (min > max) return make_error("'minItems' at " + at(path) + " is above 'maxItems'");
    std::vector<uint32_t> prefix;
    const json* rest = nullptr;  // the schema of items after the prefix; null: any value
    std::string rest_path;
    const bool tuple = schema.contains("items") && schema["items"].is_array();
    const char* prefix_key = tuple ? "items" : "prefixItems";
    if (schema.contains(prefix_key)) {
      const json& list = schema[prefix_key];
      if (!list.is_array()) return make_error("'prefixItems' at " + at(path) + " must be an array");
      for (size_t i = 0; i < list.size(); ++i) {
        KIPP_ASSIGN_OR_RETURN(const uint32_t item,
                              compile(list[i], path + "/" + prefix_key + "/" + std::to_string(i), depth + 1));
        prefix.push_back(item);
      }
    }
    const char* rest_key = tuple ? "additionalItems" : "items";
    if (!tuple && schema.contains("additionalItems"))
      return make_error("'additionalItems' at " + at(path) + " is supported only with an array 'items'");
    if (schema.contains(rest_key)) {
      rest = &schema[rest_key];
      rest_path = path + "/" + rest_key;
    }
    if (rest && rest->is_boolean() && !rest->get<bool>())
      max = std::min<uint32_t>(max, static_cast<uint32_t>(prefix.size()));
    if (min > max) return make_error("'minItems' at " + at(path) + " needs more items than the schema allows");
    uint32_t item = 0;
    if (max > prefix.size()) {
      if (rest) {
        KIPP_ASSIGN_OR_RETURN(item, compile(*rest, rest_path, depth + 1));
      } else {
        item = rules_.any_value();
      }
    }
    const uint32_t rule = b_.new_rule(path);
    // Arrays of n <= prefix items: the first n prefix schemas.
    for (uint32_t n = min; n <= std::min<uint32_t>(max, static_cast<uint32_t>(prefix.size())); ++n) {
      B::Sequence seq{b_.byte('[')};
      for (uint32_t i = 0; i < n; ++i) {
        if (i) seq.push_back(b_.byte(','));
        seq.push_back(B::ref(prefix[i]));
      }
      seq.push_back(b_.byte(']'));
      b_.add_alternative(rule, seq);
    }
    if (max > prefix.size()) {
      // More: the whole prefix, then items of `rest` (the first one without a comma when no prefix).
      B::Sequence seq{b_.byte('[')};
      for (size_t i = 0; i < prefix.size(); ++i) {
        if (i) seq.push_back(b_.byte(','));
        seq.push_back(B::ref(prefix[i]));
      }
      const uint32_t extra_min =
          std::max<uint32_t>(min, static_cast<uint32_t>(prefix.size()) + 1) - static_cast<uint32_t>(prefix.size());
      const uint32_t extra_max = max == kUnbounded ? kUnbounded : max - static_cast<uint32_t>(prefix.size());
      const uint32_t comma_item = b_.sequence_rule("item", {b_.byte(','), B::ref(item)});
      if (prefix.empty()) {
        seq.push_back(B::ref(item));
        seq.push_back(B::repeat(comma_item, extra_min - 1, extra_max == kUnbounded ? kUnbounded : extra_max - 1));
      } else {
        seq.push_back(B::repeat(comma_item, extra_min, extra_max));
      }
      seq.push_back(b_.byte(']'));
      b_.add_alternative(rule, seq);
    }
    return rule;
  }

  Expected<uint32_t> object_schema(const json& schema, const std::string& path, int depth) {
    std::vector<std::pair<std::string, uint32_t>> members;
    std::vector<bool> required;
    std::set<std::string> required_names;
    if (schema.contains("required")) {
      const json& list = schema["required"];
      if (!list.is_array()) return make_error("'required' at " + at(path) + " must be an array of strings");
      for (const json& name : list) {
        if (!name.is_string()) return make_error("'required' at " + at(path) + " must be an array of strings");
        required_names.insert(name.get<std::string>());
      }
    }
    const json* additional = schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
    const bool closed = !additional || (additional->is_boolean() && !additional->get<bool>());
    const bool has_properties = schema.contains("properties") && !schema["properties"].empty();
    if (!closed) {
      if (has_properties || !required_names.empty())
        return make_error("'additionalProperties' other than false together with properties or required at " +
                          at(path) + " is not supported");
      KIPP_ASSIGN_OR_RETURN(const uint32_t value, compile(*additional, path + "/additionalProperties", depth + 1));
      const uint32_t member =
          b_.sequence_rule("member", {B::ref(rules_.string(0, kUnbounded)), b_.byte(':'), B::ref(value)});
      const uint32_t more = b_.sequence_rule("members", {b_.byte(','), B::ref(member)});
      const uint32_t rule = b_.new_rule(path);
      b_.add_alternative(rule, {b_.byte('{'), b_.byte('}')});
      b_.add_alternative(rule, {b_.byte('{'), B::ref(member), B::repeat(more, 0, kUnbounded), b_.byte('}')});
      return rule;
    }
    std::set<std::string> declared;
    if (schema.contains("properties")) {
      const json& properties = schema["properties"];
      if (!properties.is_object()) return make_error("'properties' at " + at(path) + " must be an object");
      for (auto it = properties.begin(); it != properties.end(); ++it) {
        KIPP_ASSIGN_OR_RETURN(const uint32_t value,
                              compile(it.value(), path + "/properties/" + escape_pointer(it.key()), depth + 1));
        members.push_back({it.key(), value});
        required.push_back(required_names.count(it.key()) != 0);
        declared.insert(it.key());
      }
    }
    for (const std::string& name : required_names) {
      if (declared.count(name)) continue;
      if (additional)
        return make_error("required property '" + name + "' at " + at(path) +
                          " is forbidden by additionalProperties false");
      members.push_back({name, rules_.any_value()});
      required.push_back(true);
    }
    // after[i][started]: the members from i on, `started` when one was written (a comma first).
    const size_t n = members.size();
    std::vector<std::array<uint32_t, 2>> after(n + 1);
    for (size_t i = n + 1; i-- > 0;) {
      for (int started = 0; started < 2; ++started) {
        const uint32_t rule = b_.new_rule(path + " members");
        after[i][started] = rule;
        if (i == n) {
          b_.add_alternative(rule, {});
          continue;
        }
        B::Sequence seq;
        if (started) seq.push_back(b_.byte(','));
        b_.append_literal(seq, json(members[i].first).dump() + ":");
        seq.push_back(B::ref(members[i].second));
        seq.push_back(B::ref(after[i + 1][1]));
        b_.add_alternative(rule, seq);
        if (!required[i]) b_.add_alternative(rule, {B::ref(after[i + 1][started])});
      }
    }
    return b_.sequence_rule(path, {b_.byte('{'), B::ref(after[0][0]), b_.byte('}')});
  }

  GrammarBuilder& b_;
  JsonRules rules_;
  const json& document_;
  std::map<std::string, uint32_t> refs_;
};

}  // namespace

Expected<uint32_t> compile_json_schema_into(GrammarBuilder& builder, std::string_view schema_json) {
  const json document = json::parse(schema_json, nullptr, false);
  if (document.is_discarded()) return make_error("the JSON Schema is not valid JSON");
  SchemaCompiler compiler(builder, document);
  return compiler.compile(document, "", 0);
}

Expected<GrammarPtr> compile_json_schema(std::string_view schema_json) {
  GrammarBuilder builder;
  KIPP_ASSIGN_OR_RETURN(const uint32_t root, compile_json_schema_into(builder, schema_json));
  auto grammar = builder.finish(root);
  if (!grammar.ok()) return make_error("JSON Schema: " + grammar.message());
  return grammar;
}

GrammarPtr any_json_object() {
  GrammarBuilder builder;
  JsonRules rules(builder);
  const uint32_t root = rules.any_object();
  return builder.finish(root).value();  // a fixed, valid grammar
}

}  // namespace kipp::grammar
