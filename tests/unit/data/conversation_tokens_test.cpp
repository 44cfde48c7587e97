// Multi-turn qwen3 SFT records against the real template: every golden conversation of
// tests/golden/qwen3_chat_goldens.jsonl (rendered by the Qwen3 chat template itself) is written
// as an OpenAI record, read back by the dataset reader and tokenized. The ids must spell the
// golden rendering, and the loss must cover exactly the assistant spans found in that text by
// searching the turn markers, independently of the renderer's own span bookkeeping.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "data/record_tokens.h"
#include "data/records.h"
#include "data/training_tokenizer.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/mini_checkpoint.h"
#include "unit/helpers/test_assertions.h"

#ifndef KIPP_SOURCE_DIR
#error "KIPP_SOURCE_DIR must be defined (tests/CMakeLists.txt) to find tests/golden"
#endif

namespace kipp::data {
namespace {

using Json = nlohmann::ordered_json;
using kipp::test_support::has_substr;

constexpr std::string_view kHeader = "<|im_start|>assistant\n";
constexpr std::string_view kEnd = "<|im_end|>\n";

std::vector<Json> read_goldens() {
  std::ifstream in(std::string(KIPP_SOURCE_DIR) + "/tests/golden/qwen3_chat_goldens.jsonl");
  EXPECT_TRUE(in.good());
  std::vector<Json> goldens;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) goldens.push_back(Json::parse(line));
  }
  return goldens;
}

// The golden's text without its generation prompt: what a training record renders.
std::string closed_rendering(const Json& golden) {
  std::string text = golden.at("expected").get<std::string>();
  if (!golden.at("add_generation_prompt").get<bool>()) return text;
  std::string prompt(kHeader);
  if (golden.contains("enable_thinking") && !golden.at("enable_thinking").get<bool>()) {
    prompt += "<think>\n\n</think>\n\n";
  }
  EXPECT_TRUE(text.ends_with(prompt)) << golden.at("id");
  return text.substr(0, text.size() - prompt.size());
}

// The assistant spans by the markers: after each assistant header through the next
// "<|im_end|>\n". Only meaningful when no other text holds the markers (checked by the caller).
std::vector<std::string> marker_spans(const std::string& text) {
  std::vector<std::string> spans;
  for (size_t at = text.find(kHeader); at != std::string::npos; at = text.find(kHeader, at + 1)) {
    const size_t begin = at + kHeader.size();
    const size_t end = text.find(kEnd, begin);
    if (end == std::string::npos) break;
    spans.push_back(text.substr(begin, end + kEnd.size() - begin));
  }
  return spans;
}

class Qwen3Conversations : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kipp::testing::write_mini_checkpoint(dir_.path()).ok());
    auto loaded = load_training_tokenizer(dir_.file("tokenizer.json"));
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    tokenizer_ = std::make_unique<TrainingTokenizer>(std::move(*loaded));
  }

  std::string decode(std::vector<uint32_t> ids) const {
    auto text = tokenizer_->tokenizer.decode(ids);
    EXPECT_TRUE(text.ok());
    return text.ok() ? *text : "";
  }

  // Every golden as one OpenAI record of a JSONL file, read back by the dataset reader.
  std::vector<Record> read_as_records(const std::vector<Json>& goldens) {
    const std::string path = dir_.file("goldens.jsonl");
    {
      std::ofstream out(path, std::ios::binary);
      for (const Json& golden : goldens) {
        Json record = {{"messages", golden.at("messages")}};
        if (golden.contains("tools")) record["tools"] = golden.at("tools");
        out << record.dump() << "\n";
      }
    }
    DatasetOptions options;
    options.format = DatasetFormat::OpenAi;
    auto reader = RecordReader::open({path}, options, [](const std::string& line) { ADD_FAILURE() << line; });
    EXPECT_TRUE(reader.ok()) << reader.message();
    std::vector<Record> records;
    Record record;
    while (reader.ok()) {
      auto more = (*reader)->next(record);
      EXPECT_TRUE(more.ok()) << more.message();
      if (!more.ok() || !*more) break;
      records.push_back(record);
    }
    return records;
  }

  const RecordTokenOptions qwen3_{ChatFormat::Qwen3};
  kipp::testing::TempDir dir_;
  std::unique_ptr<TrainingTokenizer> tokenizer_;
};

TEST_F(Qwen3Conversations, EveryAssistantTurnCarriesLossAsTheTemplateRendersIt) {
  const std::vector<Json> goldens = read_goldens();
  const std::vector<Record> records = read_as_records(goldens);
  ASSERT_EQ(records.size(), goldens.size());
  std::set<std::string> checked;
  for (size_t g = 0; g < goldens.size(); ++g) {
    const std::string id = goldens[g].at("id").get<std::string>();
    SCOPED_TRACE(id);
    size_t assistants = 0;
    for (const ChatMessage& message : records[g].messages) assistants += message.role == "assistant";
    const std::string whole = closed_rendering(goldens[g]);
    const std::vector<std::string> spans = marker_spans(whole);
    // The marker search is the oracle only where each assistant message has exactly one header
    // (a message quoting "<|im_start|>assistant" would fool it).
    if (assistants == 0 || spans.size() != assistants) continue;

    auto tokens = tokenize_record(records[g], *tokenizer_, qwen3_);
    ASSERT_TRUE(tokens.ok()) << tokens.message();
    EXPECT_EQ(tokens->rendered, whole);
    ASSERT_EQ(tokens->ids.back(), tokenizer_->eos_id);
    EXPECT_EQ(tokens->counts.back(), 0);

    // Maximal runs of counted and uncounted tokens: each run is whole segments, so it decodes
    // to complete UTF-8. Together they spell the rendering; the counted runs are the spans.
    std::string spelled;
    std::vector<std::string> counted;
    for (size_t i = 0; i + 1 < tokens->ids.size();) {
      size_t j = i;
      while (j + 1 < tokens->ids.size() && tokens->counts[j] == tokens->counts[i]) ++j;
      const std::string run = decode({tokens->ids.begin() + i, tokens->ids.begin() + j});
      spelled += run;
      if (tokens->counts[i]) counted.push_back(run);
      i = j;
    }
    // The tokenizer normalizes to NFC (the "unicode" golden holds a decomposed "é"): the ids
    // spell the whole rendering as the tokenizer normalizes it.
    auto own = tokenizer_->tokenizer.encode(whole, SpecialTokens::Parse);
    ASSERT_TRUE(own.ok());
    EXPECT_EQ(spelled, decode(*own));
    if (id != "unicode") {
      EXPECT_EQ(spelled, whole);
    }
    EXPECT_EQ(counted, spans);

    // The boundary rule: spans begin after the header's newline and end before a special
    // token, so where no span begins with whitespace the ids are the whole text's own.
    bool whitespace_start = false;
    for (const std::string& span : spans) whitespace_start |= span[0] == ' ' || span[0] == '\n';
    if (!whitespace_start) {
      EXPECT_EQ(std::vector<uint32_t>(tokens->ids.begin(), tokens->ids.end() - 1), *own);
    }
    checked.insert(id);
  }
  // The conversations the multi-turn rules are about were among those checked: three assistant
  // turns with tools and the first one's reasoning dropped, tool chains keeping reasoning,
  // long histories dropping it, tool calls without reasoning.
  for (const char* id : {"sft-multi-turn-tools", "calls-chain-final", "calls-chain-new-query", "long-history",
                         "calls-chain-no-reasoning", "calls-tools-no-system-think-false", "history-reasoning-spaces",
                         "tool-then-answer"}) {
    EXPECT_TRUE(checked.contains(id)) << id;
  }
  EXPECT_GE(checked.size(), 40u);
}

TEST_F(Qwen3Conversations, EarlierReasoningIsDroppedFromTheTrainedText) {
  // The first turn's reasoning precedes the last user query: the template drops it, so the
  // model is not trained on it; the last turn's is kept.
  Record record;
  record.messages = {{"user", "a", std::nullopt},
                     {"assistant", "one", std::string("hidden thought")},
                     {"user", "b", std::nullopt},
                     {"assistant", "two", std::string("kept thought")}};
  auto tokens = tokenize_record(record, *tokenizer_, qwen3_);
  ASSERT_TRUE(tokens.ok()) << tokens.message();
  EXPECT_FALSE(has_substr(tokens->rendered, "hidden thought"));
  std::vector<uint32_t> counted;
  for (size_t i = 0; i < tokens->ids.size(); ++i) {
    if (tokens->counts[i]) counted.push_back(tokens->ids[i]);
  }
  EXPECT_EQ(decode(counted), "one<|im_end|>\n<think>\nkept thought\n</think>\n\ntwo<|im_end|>\n");
}

TEST_F(Qwen3Conversations, ToolsOnlyRenderWithQwen3) {
  Record record;
  record.messages = {{"user", "q", std::nullopt}, {"assistant", "a", std::nullopt}};
  record.tools = {R"({"type": "function", "function": {"name": "f"}})"};
  auto refused = tokenize_record(record, *tokenizer_, RecordTokenOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(has_substr(refused.message(), "tools are only supported by the qwen3")) << refused.message();
  auto tokens = tokenize_record(record, *tokenizer_, qwen3_);
  ASSERT_TRUE(tokens.ok()) << tokens.message();
  EXPECT_TRUE(has_substr(tokens->rendered, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n"));
}

}  // namespace
}  // namespace kipp::data
