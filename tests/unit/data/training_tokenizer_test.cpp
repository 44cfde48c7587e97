// The run's tokenizer from tokenizer.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "data/training_tokenizer.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/mini_checkpoint.h"
#include "unit/helpers/test_assertions.h"

namespace kipp::data {
namespace {

using kipp::test_support::has_substr;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

TEST(TokenCorpus, TokenizerFromTokenizerJson) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::write_mini_checkpoint(dir.path()).ok());
  auto tokenizer = load_training_tokenizer(dir.file("tokenizer.json"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  EXPECT_EQ(tokenizer->vocab_size, testing::kMiniImEnd + 1);  // highest id + 1
  EXPECT_EQ(tokenizer->eos_id, testing::kMiniEndOfText);      // no <eos>: <|endoftext|>
  EXPECT_EQ(tokenizer->bos_id, testing::kMiniEndOfText);
  EXPECT_FALSE(tokenizer->tokenizer_config_json.empty());  // the neighbouring file was read
}

TEST(TokenCorpus, TokenizerWithoutEndTokenIsAnError) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::write_mini_checkpoint(dir.path()).ok());
  auto json = nlohmann::json::parse(*read_text_file(dir.file("tokenizer.json")));
  auto& added = json["added_tokens"];
  added.erase(std::remove_if(added.begin(), added.end(),
                             [](const nlohmann::json& t) { return t["content"] == "<|endoftext|>"; }),
              added.end());
  write_bytes(dir.file("tokenizer.json"), json.dump());
  auto tokenizer = load_training_tokenizer(dir.file("tokenizer.json"));
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_TRUE(has_substr(tokenizer.message(), "no end-of-document token"));
  EXPECT_FALSE(load_training_tokenizer(dir.file("missing.json")).ok());
  write_bytes(dir.file("bad.json"), "{\"model\": 3");
  EXPECT_FALSE(load_training_tokenizer(dir.file("bad.json")).ok());
}

}  // namespace
}  // namespace kipp::data
