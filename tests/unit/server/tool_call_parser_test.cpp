// The tool-call parser: blocks to calls, everything else (malformed blocks included) to content,
// whatever the pieces the text arrives in.
#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

namespace kipp::server {
namespace {

struct Result {
  std::string content;
  std::vector<ToolCallParser::Call> calls;
  bool stopped = false;
  uint32_t count = 0;
};

ToolCallParser::Options seeded(ToolCallParser::Options options = {}) {
  if (!options.id_seed) options.id_seed = 42;
  return options;
}

// Feeds `pieces` and finishes; ignores what comes after a stop, as a caller would.
Result run(const std::vector<std::string>& pieces, const ToolCallParser::Options& options) {
  ToolCallParser parser(seeded(options));
  Result result;
  const auto take = [&](ToolCallParser::Output out) {
    result.content += out.content;
    for (auto& call : out.calls) result.calls.push_back(std::move(call));
  };
  for (const std::string& piece : pieces) {
    take(parser.push(piece));
    if (parser.should_stop()) break;
  }
  take(parser.finish());
  result.stopped = parser.should_stop();
  result.count = parser.call_count();
  return result;
}

Result run(const std::string& text, const ToolCallParser::Options& options = {}) {
  return run(std::vector<std::string>{text}, options);
}

void expect_same(const Result& got, const Result& want, const std::string& what) {
  EXPECT_EQ(got.content, want.content) << what;
  EXPECT_EQ(got.stopped, want.stopped) << what;
  EXPECT_EQ(got.count, want.count) << what;
  ASSERT_EQ(got.calls.size(), want.calls.size()) << what;
  for (size_t i = 0; i < got.calls.size(); ++i) {
    EXPECT_EQ(got.calls[i].index, want.calls[i].index) << what;
    EXPECT_EQ(got.calls[i].id, want.calls[i].id) << what;
    EXPECT_EQ(got.calls[i].name, want.calls[i].name) << what;
    EXPECT_EQ(got.calls[i].arguments, want.calls[i].arguments) << what;
  }
}

// Every split into two pieces, and one byte at a time, give what one piece gives.
void expect_split_invariant(const std::string& text, const ToolCallParser::Options& options = {}) {
  const Result whole = run(text, options);
  for (size_t at = 0; at <= text.size(); ++at) {
    expect_same(run(std::vector<std::string>{text.substr(0, at), text.substr(at)}, options), whole,
                text + " split at " + std::to_string(at));
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  expect_same(run(bytes, options), whole, text + " byte by byte");
}

const std::string kWeather =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const std::string kSearch =
    "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"cats\", \"limit\": 3}}\n</tool_call>";

TEST(ToolCallParser, OneCall) {
  const Result result = run(kWeather);
  EXPECT_EQ(result.content, "");
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].index, 0u);
  EXPECT_EQ(result.calls[0].name, "get_weather");
  EXPECT_EQ(result.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_TRUE(std::regex_match(result.calls[0].id, std::regex("call_[A-Za-z0-9]{24}"))) << result.calls[0].id;
  EXPECT_EQ(result.count, 1u);
  EXPECT_FALSE(result.stopped);
  expect_split_invariant(kWeather);
}

TEST(ToolCallParser, ContentThenSeveralCalls) {
  const std::string text = "Let me check both.\n" + kWeather + "\n" + kSearch + "\n";
  const Result result = run(text);
  EXPECT_EQ(result.content, "Let me check both.");
  ASSERT_EQ(result.calls.size(), 2u);
  EXPECT_EQ(result.calls[0].name, "get_weather");
  EXPECT_EQ(result.calls[1].index, 1u);
  EXPECT_EQ(result.calls[1].name, "search");
  EXPECT_EQ(result.calls[1].arguments, R"({"query":"cats","limit":3})");
  EXPECT_NE(result.calls[0].id, result.calls[1].id);
  expect_split_invariant(text);
  // Blocks without the newlines, separated by other whitespace; text after the calls is content.
  const std::string tight =
      "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call> \t\r\n"
      "<tool_call>{\"arguments\":\"x\",\"name\":\"b\"}</tool_call>\n\nDone.  ";
  const Result second = run(tight);
  EXPECT_EQ(second.content, "Done.  ");
  ASSERT_EQ(second.calls.size(), 2u);
  EXPECT_EQ(second.calls[0].arguments, "{}");
  EXPECT_EQ(second.calls[1].name, "b");
  EXPECT_EQ(second.calls[1].arguments, "x");
  expect_split_invariant(tight);
}

TEST(ToolCallParser, PlainTextIsContentAndNoHalfTagLeaks) {
  const std::string text = "No calls <tool here>, a </tool_call> alone, and <tool_cal at the end\n";
  const Result result = run(text);
  EXPECT_EQ(result.content, text);
  EXPECT_TRUE(result.calls.empty());
  EXPECT_EQ(result.count, 0u);
  expect_split_invariant(text);

  ToolCallParser parser(seeded());
  EXPECT_EQ(parser.push("Hello <tool_").content, "Hello");
  EXPECT_EQ(parser.push("call").content, "");
  EXPECT_EQ(parser.push("s!").content, " <tool_calls!");
  EXPECT_EQ(parser.push(" \n").content, "");
  EXPECT_EQ(parser.finish().content, " \n");
}

TEST(ToolCallParser, StringArgumentsAreKeptAsWritten) {
  const std::string text =
      "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"city\\\": \\\"Z\\u00fcrich\\\",  \\\"n\\\": "
      "1.50}\"}\n</tool_call>";
  const Result result = run(text);
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].arguments, "{\"city\": \"Z\xC3\xBCrich\",  \"n\": 1.50}");
  expect_split_invariant(text);
}

TEST(ToolCallParser, UnicodeArgumentsAreCompactUtf8InTheModelsKeyOrder) {
  const std::string text =
      "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"z\": \"Z\xC3\xBCrich \xE6\xA4\x9C\xE7\xB4\xA2 "
      "\xF0\x9F\x94\x8E\", \"a\": \"\\u00e9\\n\\\"\", \"list\": [1, {\"k\": null}]}}\n</tool_call>";
  const Result result = run(text);
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].arguments,
            "{\"z\":\"Z\xC3\xBCrich \xE6\xA4\x9C\xE7\xB4\xA2 "
            "\xF0\x9F\x94\x8E\",\"a\":\"\xC3\xA9\\n\\\"\",\"list\":[1,{\"k\":null}]}");
  expect_split_invariant(text);
}

TEST(ToolCallParser, MalformedBlocksAreContent) {
  const std::vector<std::string> blocks = {
      "<tool_call>\nnot json\n</tool_call>",
      "<tool_call>\n{\"arguments\": {}}\n</tool_call>",                                  // no name
      "<tool_call>\n{\"name\": 3, \"arguments\": {}}\n</tool_call>",                     // name not a string
      "<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>",                  // empty name
      "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",                                    // no arguments
      "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",                // arguments an array
      "<tool_call>\n{\"name\": \"f\", \"arguments\": 7}\n</tool_call>",                  // arguments a number
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}, \"id\": \"x\"}\n</tool_call>",  // an extra key
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}} trailing\n</tool_call>",        // text after the JSON
      "<tool_call>\n[\"f\", {}]\n</tool_call>",                                          // not an object
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"\xFF\"}}\n</tool_call>",  // invalid UTF-8
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n",                     // never closed
      "<tool_call>",                                                                     // only the tag
  };
  for (const std::string& block : blocks) {
    for (const std::string& text : {block, "Before.\n" + block, "Before. " + block + "\n after"}) {
      const Result result = run(text);
      EXPECT_EQ(result.content, text);
      EXPECT_TRUE(result.calls.empty()) << text;
      EXPECT_EQ(result.count, 0u) << text;
      EXPECT_FALSE(result.stopped) << text;
      expect_split_invariant(text);
    }
  }
  // A malformed block among valid ones: only the valid ones are calls (whitespace next to them
  // is dropped; the malformed block's own text is kept).
  const std::string mixed = kWeather + "\n<tool_call>oops</tool_call>\n" + kSearch;
  const Result result = run(mixed);
  EXPECT_EQ(result.content, "<tool_call>oops</tool_call>");
  ASSERT_EQ(result.calls.size(), 2u);
  EXPECT_EQ(result.calls[1].index, 1u);
  EXPECT_EQ(result.count, 2u);
  expect_split_invariant(mixed);
}

TEST(ToolCallParser, UnknownNamesAreContent) {
  ToolCallParser::Options options;
  options.allowed_names = {"search", "lookup"};
  const std::string text = "A\n" + kWeather + "\n" + kSearch;
  const Result result = run(text, options);
  EXPECT_EQ(result.content, "A\n" + kWeather);
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].name, "search");
  EXPECT_EQ(result.calls[0].index, 0u);
  expect_split_invariant(text, options);
}

TEST(ToolCallParser, MaxCallsStopsAfterTheLastAllowedBlock) {
  ToolCallParser::Options one;
  one.max_calls = 1;
  const std::string text = "Sure.\n<tool_call>bad</tool_call>\n" + kWeather + "\n" + kSearch + " and more";
  const Result result = run(text, one);
  EXPECT_EQ(result.content, "Sure.\n<tool_call>bad</tool_call>");
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].name, "get_weather");
  EXPECT_TRUE(result.stopped);
  expect_split_invariant(text, one);

  // The stop comes with the piece that closes the block; later pieces give nothing.
  ToolCallParser parser(seeded(one));
  EXPECT_EQ(parser.push(kWeather.substr(0, 20)).calls.size(), 0u);
  EXPECT_FALSE(parser.should_stop());
  const auto out = parser.push(kWeather.substr(20) + "tail");
  EXPECT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.content, "");
  EXPECT_TRUE(parser.should_stop());
  EXPECT_EQ(parser.push(kSearch).calls.size(), 0u);
  const auto last = parser.finish();
  EXPECT_TRUE(last.content.empty() && last.calls.empty());

  ToolCallParser::Options none;
  none.max_calls = 0;
  const Result refused = run(kWeather, none);
  EXPECT_EQ(refused.content, kWeather);
  EXPECT_EQ(refused.count, 0u);
  EXPECT_FALSE(refused.stopped);

  ToolCallParser::Options two;
  two.max_calls = 2;
  const Result both = run(kWeather + kSearch + kWeather, two);
  EXPECT_EQ(both.calls.size(), 2u);
  EXPECT_TRUE(both.stopped);
}

TEST(ToolCallParser, IdsFollowTheSeed) {
  const std::string text = kWeather + kSearch;
  ToolCallParser::Options a;
  a.id_seed = 1;
  ToolCallParser::Options b;
  b.id_seed = 2;
  const Result first = run(text, a);
  const Result again = run(text, a);
  const Result other = run(text, b);
  ASSERT_EQ(first.calls.size(), 2u);
  EXPECT_EQ(first.calls[0].id, again.calls[0].id);
  EXPECT_EQ(first.calls[1].id, again.calls[1].id);
  EXPECT_NE(first.calls[0].id, other.calls[0].id);
  // Unseeded parsers draw their own.
  ToolCallParser p1({});
  ToolCallParser p2({});
  EXPECT_NE(p1.push(kWeather).calls.at(0).id, p2.push(kWeather).calls.at(0).id);
}

}  // namespace
}  // namespace kipp::server
