// The JSON Schema compiler: which texts each schema feature accepts and rejects, bounds checked
// exhaustively against integer arithmetic, and the errors for what is not supported.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "grammar/grammar.h"
#include "unit/grammar/grammar_test_support.h"

namespace kipp::grammar {
namespace {

using testing::matches;
using testing::schema_grammar;

std::string schema_error(const std::string& schema) {
  auto grammar = compile_json_schema(schema);
  return grammar.ok() ? "" : grammar.message();
}

TEST(JsonSchema, IntegerBoundsExhaustive) {
  const GrammarPtr g = schema_grammar(R"({"type":"integer","minimum":-17,"maximum":1234})");
  for (int v = -300; v <= 1500; ++v) EXPECT_EQ(matches(g, std::to_string(v)), v >= -17 && v <= 1234) << v;
  for (const char* bad : {"-0", "007", "01", "+5", "1.0", "1e2", " 1", "", "-"}) EXPECT_FALSE(matches(g, bad)) << bad;
}

TEST(JsonSchema, IntegerExclusiveAndFractionalBounds) {
  const GrammarPtr g = schema_grammar(R"({"type":"integer","exclusiveMinimum":-3,"maximum":99.5})");
  for (int v = -200; v <= 200; ++v) EXPECT_EQ(matches(g, std::to_string(v)), v > -3 && v <= 99) << v;
  const GrammarPtr h = schema_grammar(R"({"type":"integer","minimum":-2.5,"exclusiveMaximum":-1})");
  for (int v = -20; v <= 20; ++v) EXPECT_EQ(matches(h, std::to_string(v)), v >= -2 && v < -1) << v;
  const GrammarPtr free_integer = schema_grammar(R"({"type":"integer"})");
  EXPECT_TRUE(matches(free_integer, "9999999999999999"));
  EXPECT_FALSE(matches(free_integer, "10000000000000000"));
  EXPECT_TRUE(matches(free_integer, "-123"));
  EXPECT_TRUE(matches(free_integer, "0"));
}

// Every decimal with up to three fraction digits in a range, against exact thousandths.
void check_number_grid(const std::string& schema, long lo_thousandths, bool lo_exclusive, long hi_thousandths,
                       bool hi_exclusive) {
  const GrammarPtr g = schema_grammar(schema);
  for (long t = -13000; t <= 13000; ++t) {
    const bool inside = (lo_exclusive ? t > lo_thousandths : t >= lo_thousandths) &&
                        (hi_exclusive ? t < hi_thousandths : t <= hi_thousandths);
    const long whole = std::labs(t) / 1000, frac = std::labs(t) % 1000;
    char text[64];
    std::snprintf(text, sizeof text, "%s%ld.%03ld", t < 0 ? "-" : "", whole, frac);
    if (t == 0) std::snprintf(text, sizeof text, "0.000");
    EXPECT_EQ(matches(g, text), inside) << schema << " " << text;
    std::string trimmed = text;  // without trailing zeros (and the point when nothing is left)
    while (trimmed.back() == '0' && trimmed.find('.') != std::string::npos) trimmed.pop_back();
    if (trimmed.back() == '.') trimmed.pop_back();
    if (trimmed == "-0") continue;
    EXPECT_EQ(matches(g, trimmed), inside) << schema << " " << trimmed;
  }
}

TEST(JsonSchema, NumberBoundsWithFractions) {
  check_number_grid(R"({"type":"number","minimum":0.5,"maximum":10.25})", 500, false, 10250, false);
  check_number_grid(R"({"type":"number","exclusiveMinimum":-1.5,"exclusiveMaximum":2})", -1500, true, 2000, true);
  check_number_grid(R"({"type":"number","minimum":-12.125,"exclusiveMaximum":-0.5})", -12125, false, -500, true);
  check_number_grid(R"({"type":"number","exclusiveMinimum":0,"maximum":0.75})", 0, true, 750, false);
  const GrammarPtr g = schema_grammar(R"({"type":"number","minimum":0})");
  EXPECT_TRUE(matches(g, "0"));
  EXPECT_TRUE(matches(g, "123.456"));
  EXPECT_FALSE(matches(g, "-0.001"));
  EXPECT_FALSE(matches(g, "01.5"));
  EXPECT_FALSE(matches(g, "1."));
  EXPECT_FALSE(matches(g, ".5"));
  EXPECT_TRUE(matches(g, "0.12345678901234"));    // 14 digits after "0."
  EXPECT_FALSE(matches(g, "1.234567890123456"));  // 16 significant digits with a bound
  EXPECT_NE(schema_error(R"({"type":"number","minimum":3,"maximum":2})").find("minimum"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"integer","minimum":2.5,"maximum":2.7})").find("minimum"), std::string::npos);
}

TEST(JsonSchema, StringLengthsCountCharacters) {
  const GrammarPtr g = schema_grammar(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_FALSE(matches(g, R"("a")"));
  EXPECT_TRUE(matches(g, R"("ab")"));
  EXPECT_TRUE(matches(g, R"("abc")"));
  EXPECT_FALSE(matches(g, R"("abcd")"));
  EXPECT_TRUE(matches(g, "\"\xC3\xA9\xE2\x82\xAC\""));                              // é€: two characters
  EXPECT_TRUE(matches(g, "\"\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\""));  // three emoji
  EXPECT_FALSE(matches(g, "\"\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80!\""));
  EXPECT_TRUE(matches(g, R"("\n\"")"));  // escapes count as one
  EXPECT_TRUE(matches(g, R"("\u00e9x")"));
  EXPECT_FALSE(matches(g, R"("\ud800x")"));          // no lone surrogates
  EXPECT_FALSE(matches(g, "\"a\nb\""));              // raw control characters
  EXPECT_FALSE(matches(g, "\"\xC0\xAF\xC0\xAF\""));  // overlong encodings
  EXPECT_FALSE(matches(g, "\"\xED\xA0\x80x\""));     // an encoded surrogate
}

TEST(JsonSchema, EnumConstAndTypes) {
  const GrammarPtr g = schema_grammar(R"({"enum":["red",1,null,{"a":[true]},"x\"y"]})");
  for (const char* ok : {R"("red")", "1", "null", R"({"a":[true]})", R"("x\"y")"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {R"("blue")", "1.0", R"({"a": [true]})", "true"}) EXPECT_FALSE(matches(g, bad)) << bad;
  const GrammarPtr typed = schema_grammar(R"({"type":"string","enum":["a",2]})");
  EXPECT_TRUE(matches(typed, R"("a")"));
  EXPECT_FALSE(matches(typed, "2"));
  const GrammarPtr c = schema_grammar(R"({"const":"only"})");
  EXPECT_TRUE(matches(c, R"("only")"));
  EXPECT_FALSE(matches(c, R"("Only")"));
  const GrammarPtr nullable = schema_grammar(R"({"type":["string","null"],"maxLength":1})");
  EXPECT_TRUE(matches(nullable, "null"));
  EXPECT_TRUE(matches(nullable, R"("x")"));
  EXPECT_FALSE(matches(nullable, R"("xy")"));
  EXPECT_FALSE(matches(nullable, "0"));
  const GrammarPtr b = schema_grammar(R"({"type":"boolean"})");
  EXPECT_TRUE(matches(b, "true"));
  EXPECT_TRUE(matches(b, "false"));
  EXPECT_FALSE(matches(b, "null"));
}

TEST(JsonSchema, ObjectsInOrderWithOptionalMembers) {
  const GrammarPtr g = schema_grammar(
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},
          "required":["b"],"additionalProperties":false})");
  EXPECT_TRUE(matches(g, R"({"b":"x"})"));
  EXPECT_TRUE(matches(g, R"({"a":1,"b":"x"})"));
  EXPECT_TRUE(matches(g, R"({"a":1,"b":"x","c":true})"));
  EXPECT_TRUE(matches(g, R"({"b":"x","c":false})"));
  EXPECT_FALSE(matches(g, R"({"a":1})"));
  EXPECT_FALSE(matches(g, R"({"b":"x","a":1})"));  // schema order
  EXPECT_FALSE(matches(g, R"({"b":"x","d":1})"));
  EXPECT_FALSE(matches(g, R"({ "b":"x"})"));  // compact
  EXPECT_FALSE(matches(g, R"({,"b":"x"})"));
  const GrammarPtr open_required = schema_grammar(R"({"type":"object","required":["z"]})");
  EXPECT_TRUE(matches(open_required, R"({"z":[1,{"k":null}]})"));
  EXPECT_FALSE(matches(open_required, "{}"));
  const GrammarPtr map = schema_grammar(R"({"type":"object","additionalProperties":{"type":"integer"}})");
  EXPECT_TRUE(matches(map, R"({"x":1,"y":2})"));
  EXPECT_TRUE(matches(map, "{}"));
  EXPECT_FALSE(matches(map, R"({"x":"1"})"));
}

TEST(JsonSchema, ArraysItemsAndCounts) {
  const GrammarPtr g = schema_grammar(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})");
  EXPECT_FALSE(matches(g, "[]"));
  EXPECT_FALSE(matches(g, "[1]"));
  EXPECT_TRUE(matches(g, "[1,2]"));
  EXPECT_TRUE(matches(g, "[1,2,3]"));
  EXPECT_FALSE(matches(g, "[1,2,3,4]"));
  EXPECT_FALSE(matches(g, "[1,\"a\"]"));
  const GrammarPtr tuple = schema_grammar(R"({"prefixItems":[{"type":"string"},{"type":"boolean"}],"items":false})");
  EXPECT_TRUE(matches(tuple, "[]"));
  EXPECT_TRUE(matches(tuple, R"(["a"])"));
  EXPECT_TRUE(matches(tuple, R"(["a",true])"));
  EXPECT_FALSE(matches(tuple, R"(["a",true,1])"));
  EXPECT_FALSE(matches(tuple, R"([true])"));
  const GrammarPtr rest = schema_grammar(R"({"prefixItems":[{"const":0}],"items":{"type":"null"},"minItems":2})");
  EXPECT_FALSE(matches(rest, "[0]"));
  EXPECT_TRUE(matches(rest, "[0,null]"));
  EXPECT_TRUE(matches(rest, "[0,null,null]"));
  EXPECT_FALSE(matches(rest, "[null,null]"));
}

TEST(JsonSchema, CombinatorsAndReferences) {
  const GrammarPtr any =
      schema_grammar(R"({"anyOf":[{"type":"integer","minimum":5},{"type":"string","maxLength":1}]})");
  EXPECT_TRUE(matches(any, "7"));
  EXPECT_FALSE(matches(any, "4"));
  EXPECT_TRUE(matches(any, R"("z")"));
  const GrammarPtr one = schema_grammar(R"({"oneOf":[{"type":"integer"},{"type":"string"}]})");
  EXPECT_TRUE(matches(one, "3"));
  EXPECT_NE(schema_error(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})").find("oneOf"), std::string::npos);
  EXPECT_EQ(schema_error(R"({"oneOf":[{"const":1},{"const":2}]})"), "");
  const GrammarPtr tree = schema_grammar(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object",
      "properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}}})");
  EXPECT_TRUE(matches(tree, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"));
  EXPECT_FALSE(matches(tree, R"({"v":1,"kids":[{"kids":[]}]})"));
  const GrammarPtr old =
      schema_grammar(R"({"definitions":{"s":{"type":"string"}},"allOf":[{"$ref":"#/definitions/s"}]})");
  EXPECT_TRUE(matches(old, R"("s")"));
  const GrammarPtr root_ref = schema_grammar(R"({"type":"array","items":{"$ref":"#"},"maxItems":2})");
  EXPECT_TRUE(matches(root_ref, "[[],[[]]]"));
}

TEST(JsonSchema, PatternsAndFormats) {
  const GrammarPtr p = schema_grammar(R"({"type":"string","pattern":"^[a-z]{2,3}-\\d+(\\.[A-F])?$"})");
  for (const char* ok : {R"("ab-1")", R"("xyz-0042")", R"("ab-9.C")"}) EXPECT_TRUE(matches(p, ok)) << ok;
  for (const char* bad : {R"("a-1")", R"("abcd-1")", R"("ab-")", R"("ab-1.G")", R"("ab-1x")"})
    EXPECT_FALSE(matches(p, bad)) << bad;
  const GrammarPtr unanchored = schema_grammar(R"({"pattern":"fo+|ba[rz]"})");
  EXPECT_TRUE(matches(unanchored, R"("xxfooo")"));
  EXPECT_TRUE(matches(unanchored, R"("baz!")"));
  EXPECT_FALSE(matches(unanchored, R"("bay")"));
  const GrammarPtr quote = schema_grammar(R"({"pattern":"^[^a]\"$"})");
  EXPECT_TRUE(matches(quote, R"("b\"")"));
  EXPECT_TRUE(matches(quote, R"("\n\"")"));
  EXPECT_FALSE(matches(quote, R"("a\"")"));
  EXPECT_NE(schema_error(R"({"pattern":"(a)\\1"})").find("backreferences"), std::string::npos);
  EXPECT_NE(schema_error(R"x({"pattern":"a(?=b)"})x").find("lookaround"), std::string::npos);
  // Pattern quantifiers need their m and allow no spaces (ECMAScript); errors name the offset.
  const GrammarPtr counted = schema_grammar(R"({"pattern":"^a{2}b{1,2}c{0,}$"})");
  EXPECT_TRUE(matches(counted, R"("aab")"));
  EXPECT_TRUE(matches(counted, R"("aabbccc")"));
  EXPECT_FALSE(matches(counted, R"("abb")"));
  EXPECT_FALSE(matches(counted, R"("aabbb")"));
  const auto pattern_error = [](const char* pattern) {
    const std::string message = schema_error(std::string(R"({"pattern":")") + pattern + "\"}");
    return message.substr(message.find(": ") + 2);
  };
  EXPECT_EQ(pattern_error("a{,2}"), "a quantifier {m,n} needs a number at offset 2 of the pattern");
  EXPECT_EQ(pattern_error("a{ 2}"), "a quantifier {m,n} needs a number at offset 2 of the pattern");
  EXPECT_EQ(pattern_error("a{}"), "a quantifier {m,n} needs a number at offset 2 of the pattern");
  EXPECT_EQ(pattern_error("ab{2"), "an unterminated quantifier at offset 2 of the pattern");
  EXPECT_EQ(pattern_error("ab{2,3x"), "an unterminated quantifier at offset 2 of the pattern");
  EXPECT_EQ(pattern_error("a{2,1}"), "a quantifier {m,n} with n below m at offset 6 of the pattern");
  EXPECT_EQ(pattern_error("a{2}{3}"), "a quantifier cannot follow a quantifier at offset 4 of the pattern");

  const GrammarPtr date = schema_grammar(R"({"type":"string","format":"date"})");
  for (const char* ok : {R"("2024-02-29")", R"("2000-02-29")", R"("2023-12-31")", R"("1999-04-30")"})
    EXPECT_TRUE(matches(date, ok)) << ok;
  for (const char* bad : {R"("2023-02-29")", R"("1900-02-29")", R"("2023-04-31")", R"("2023-13-01")", R"("2023-1-01")"})
    EXPECT_FALSE(matches(date, bad)) << bad;
  const GrammarPtr time = schema_grammar(R"({"format":"date-time"})");
  EXPECT_TRUE(matches(time, R"("2024-01-02T03:04:05Z")"));
  EXPECT_TRUE(matches(time, R"("2024-01-02T23:59:59.123+05:30")"));
  EXPECT_FALSE(matches(time, R"("2024-01-02T24:00:00Z")"));
  const GrammarPtr uuid = schema_grammar(R"({"format":"uuid"})");
  EXPECT_TRUE(matches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(matches(uuid, R"("123e4567-e89b-12d3-a456-42661417400")"));
  const GrammarPtr email = schema_grammar(R"({"format":"email"})");
  EXPECT_TRUE(matches(email, R"("a.b+c@example.co.uk")"));
  EXPECT_FALSE(matches(email, R"("a@b")"));
  EXPECT_FALSE(matches(email, R"("@b.c")"));
  EXPECT_NE(schema_error(R"({"format":"hostname"})").find("hostname"), std::string::npos);
}

TEST(JsonSchema, UnsupportedAndMalformedSchemasAreNamedErrors) {
  EXPECT_EQ(schema_error(R"({"type":"object","properties":{"a":{"patternProperties":{}}}})"),
            "unsupported JSON Schema keyword 'patternProperties' at /properties/a");
  EXPECT_EQ(schema_error(R"({"type":"array","uniqueItems":true})"),
            "unsupported JSON Schema keyword 'uniqueItems' at /");
  EXPECT_EQ(schema_error(R"({"title":"t","description":"d","$schema":"x","examples":[1],"default":2,"type":"null"})"),
            "");
  EXPECT_NE(schema_error("{"), "");
  EXPECT_NE(schema_error("[1]"), "");
  EXPECT_NE(schema_error(R"({"type":"strin"})").find("unknown type"), std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref":"#/$defs/missing"})").find("points to nothing"), std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref":"http://x/y"})").find("$ref"), std::string::npos);
  EXPECT_NE(schema_error(R"({"minLength":-1})").find("minLength"), std::string::npos);
  EXPECT_NE(schema_error(R"({"allOf":[{"type":"string"},{"maxLength":2}]})").find("allOf"), std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}})"), "");  // no value at all
  std::string deep = "true";
  for (int i = 0; i < 100; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_NE(schema_error(deep).find("deeper"), std::string::npos);
}

TEST(ToolCalls, TheQwen3Block) {
  const ToolSpec tools[] = {
      {"get_weather", R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"}, {"now", ""}};
  auto grammar = compile_tool_calls(tools, 2);
  ASSERT_TRUE(grammar.ok()) << grammar.message();
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>";
  const std::string now = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(matches(*grammar, call));
  EXPECT_TRUE(matches(*grammar, call + "\n" + now));
  EXPECT_FALSE(matches(*grammar, call + "\n" + now + "\n" + now));  // max_calls
  EXPECT_FALSE(matches(*grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(matches(*grammar, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
  const ToolSpec bad[] = {{"f", R"({"type":"object","minProperties":1})"}};
  auto error = compile_tool_calls(bad, 1);
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.message().find("tools[0]"), std::string::npos);
  EXPECT_NE(error.message().find("minProperties"), std::string::npos);
}

TEST(JsonObject, AnyCompactObject) {
  const GrammarPtr g = any_json_object();
  EXPECT_TRUE(matches(g, "{}"));
  EXPECT_TRUE(matches(g, R"({"a":[1,-2.5,true,null,{"b":"\u00e9"}],"c":""})"));
  EXPECT_FALSE(matches(g, "[]"));
  EXPECT_FALSE(matches(g, R"({"a":1 })"));
  EXPECT_FALSE(matches(g, R"({"a":01})"));
}

}  // namespace
}  // namespace kipp::grammar
