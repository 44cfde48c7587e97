// Chat rendering: the native Qwen3 renderer against goldens rendered from the real template
// (tests/golden/qwen3_chat_goldens.jsonl, tools/chat_goldens/generate.mjs), the trained-model
// formats against hand-written goldens (tests/golden/chat_format_goldens.jsonl), the messages
// parser and the format names.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "unit/helpers/tokenizer_fixtures.h"

#ifndef KIPP_SOURCE_DIR
#error "KIPP_SOURCE_DIR must be defined (tests/CMakeLists.txt) to find tests/golden"
#endif

namespace kipp {
namespace {

using Json = nlohmann::ordered_json;  // keeps the tools' key order, which tojson prints

std::vector<Json> read_jsonl(const std::string& name) {
  const std::string path = std::string(KIPP_SOURCE_DIR) + "/tests/golden/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<Json> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(Json::parse(line));
  }
  return lines;
}

// Where two renderings first differ, with some context of each (escaped).
std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i < 40 ? 0 : i - 40;
  return "first difference at byte " + std::to_string(i) + "\n  got:  " + Json(got.substr(from, 120)).dump() +
         "\n  want: " + Json(want.substr(from, 120)).dump();
}

// Renders one golden record: messages through the JSON parser, tools and options as given.
Expected<std::string> render_record(ChatFormat format, const Json& record) {
  auto messages = parse_chat_messages(record.at("messages").dump());
  if (!messages.ok()) return messages.error();
  ChatOptions options;
  options.add_generation_prompt = record.at("add_generation_prompt").get<bool>();
  if (record.contains("enable_thinking")) options.enable_thinking = record.at("enable_thinking").get<bool>();
  if (record.contains("tools")) {
    for (const Json& tool : record.at("tools")) options.tools.push_back(tool.dump());
  }
  return render_chat(format, *messages, options);
}

TEST(ChatGoldens, Qwen3MatchesTheRealTemplateByteForByte) {
  const auto records = read_jsonl("qwen3_chat_goldens.jsonl");
  ASSERT_GE(records.size(), 40u);
  int failed = 0;
  for (const Json& record : records) {
    const std::string id = record.at("id").get<std::string>();
    auto rendered = render_record(ChatFormat::Qwen3, record);
    if (!rendered.ok()) {
      ADD_FAILURE() << id << ": " << rendered.message();
      ++failed;
      continue;
    }
    const std::string want = record.at("expected").get<std::string>();
    if (*rendered != want) {
      ADD_FAILURE() << id << ": " << first_difference(*rendered, want);
      ++failed;
    }
  }
  EXPECT_EQ(failed, 0) << "of " << records.size() << " goldens";
}

TEST(ChatGoldens, TrainedFormatsFollowTheirPublishedFormats) {
  const auto records = read_jsonl("chat_format_goldens.jsonl");
  ASSERT_GE(records.size(), 30u);
  for (const Json& record : records) {
    const std::string id = record.at("id").get<std::string>();
    auto format = parse_chat_format(record.at("format").get<std::string>());
    ASSERT_TRUE(format.ok()) << id << ": " << format.message();
    auto rendered = render_record(*format, record);
    if (record.contains("error")) {
      const std::string want = record.at("error").get<std::string>();
      if (rendered.ok()) {
        ADD_FAILURE() << id << ": rendered, expected the error " << want;
      } else {
        EXPECT_NE(rendered.message().find(want), std::string::npos) << id << ": " << rendered.message();
      }
      continue;
    }
    if (!rendered.ok()) {
      ADD_FAILURE() << id << ": " << rendered.message();
      continue;
    }
    const std::string want = record.at("expected").get<std::string>();
    EXPECT_EQ(*rendered, want) << id << ": " << first_difference(*rendered, want);
  }
}

TEST(ChatTemplate, FormatNamesRoundTrip) {
  const auto names = chat_format_names();
  ASSERT_EQ(names.size(), 6u);
  for (std::string_view name : names) {
    auto format = parse_chat_format(name);
    ASSERT_TRUE(format.ok()) << name;
    EXPECT_EQ(chat_format_name(*format), name);
  }
  EXPECT_EQ(chat_format_name(ChatFormat::Qwen3), "qwen3");
  auto unknown = parse_chat_format("vicuna");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.message(),
            "unknown chat format 'vicuna' (expected one of qwen3, chatml, llama2, llama3, mistral, alpaca)");
}

TEST(ChatTemplate, ParsesOpenAiMessages) {
  auto messages = parse_chat_messages(R"([
    {"role": "system", "content": "S"},
    {"role": "user", "content": "Hi", "name": "ann"},
    {"role": "assistant", "content": null, "reasoning_content": "thought", "tool_calls": []},
    {"role": "assistant", "content": "x", "reasoning_content": null},
    {"role": "tool", "content": "{}", "tool_call_id": "call_1"}
  ])");
  ASSERT_TRUE(messages.ok()) << messages.message();
  ASSERT_EQ(messages->size(), 5u);
  EXPECT_EQ((*messages)[0].role, "system");
  EXPECT_EQ((*messages)[1].content, "Hi");
  EXPECT_EQ((*messages)[2].content, "");
  EXPECT_EQ((*messages)[2].reasoning_content, std::optional<std::string>("thought"));
  EXPECT_FALSE((*messages)[3].reasoning_content.has_value());
  EXPECT_EQ((*messages)[4].role, "tool");
  auto empty = parse_chat_messages("[]");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(ChatTemplate, MessageErrorsNameTheIndex) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"role": "user"})", "messages: expected a JSON array of messages, found object"},
      {R"([{"role": "user", "content": "a"},)", "messages: invalid JSON"},
      {R"([{"role": "user", "content": "a"}, 3])", "messages[1]: expected an object, found number"},
      {R"([{"content": "a"}])", "messages[0]: role is missing"},
      {R"([{"role": 1, "content": "a"}])", "messages[0]: role must be a string, found number"},
      {R"([{"role": "user", "content": "a"}, {"role": "developer", "content": "b"}])",
       "messages[1]: role 'developer' is not supported (system, user, assistant, tool)"},
      {R"([{"role": "user"}])", "messages[0]: content is missing (expected a string or null)"},
      {R"([{"role": "user", "content": 5}])", "messages[0]: content must be a string or null, found number"},
      {R"([{"role": "user", "content": [{"type": "text", "text": "a"}]}])",
       "messages[0]: content must be a string or null, found array (content parts are unsupported)"},
      {R"([{"role": "assistant", "content": "a", "reasoning_content": 1}])",
       "messages[0]: reasoning_content must be a string or null, found number"},
      {R"([{"role": "user", "content": "a", "reasoning_content": "r"}])",
       "messages[0]: reasoning_content is only allowed on assistant messages"},
      {R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c"}]}])",
       "messages[1]: tool_calls are unsupported"},
  };
  for (const auto& [json, want] : cases) {
    auto messages = parse_chat_messages(json);
    ASSERT_FALSE(messages.ok()) << json;
    EXPECT_EQ(messages.message().rfind(want, 0), 0u) << json << "\n  got: " << messages.message();
  }
}

TEST(ChatTemplate, ParsesToolsKeepingKeyOrder) {
  auto tools = parse_chat_tools(R"([{"type": "function", "function": {"name": "f", "a": 1}}])");
  ASSERT_TRUE(tools.ok()) << tools.message();
  ASSERT_EQ(tools->size(), 1u);
  EXPECT_EQ((*tools)[0], R"({"type":"function","function":{"name":"f","a":1}})");
  std::vector<ChatMessage> messages = {{"user", "q", std::nullopt, {}}};
  ChatOptions options;
  options.tools = *tools;
  auto rendered = render_chat(ChatFormat::Qwen3, messages, options);
  ASSERT_TRUE(rendered.ok()) << rendered.message();
  EXPECT_NE(rendered->find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\", \"a\": 1}}\n</tools>"),
            std::string::npos);
  EXPECT_FALSE(parse_chat_tools("[1]").ok());
  EXPECT_FALSE(parse_chat_tools("{}").ok());
}

TEST(ChatTemplate, RecognizesTheRealQwen3Template) {
  auto dir = testing::qwen_tokenizer_dir(KIPP_SOURCE_DIR);
  ASSERT_TRUE(dir.ok()) << dir.message();
  std::ifstream in(*dir + "/tokenizer_config.json");
  ASSERT_TRUE(in.good());
  const auto config = nlohmann::json::parse(in);
  const std::string chat_template = config.at("chat_template").get<std::string>();
  EXPECT_TRUE(is_qwen3_chat_template(chat_template));
  // A template without the enable_thinking switch (the 2507 instruct/thinking ones) is not it.
  std::string no_switch = chat_template;
  for (size_t at; (at = no_switch.find("enable_thinking")) != std::string::npos;) no_switch.replace(at, 15, "x");
  EXPECT_FALSE(is_qwen3_chat_template(no_switch));
  EXPECT_FALSE(is_qwen3_chat_template(""));
  EXPECT_FALSE(
      is_qwen3_chat_template("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                             "message['content'] + '<|im_end|>\\n'}}{% endfor %}"));
}

}  // namespace
}  // namespace kipp
