// The training corpus: the run's tokenizer from tokenizer.json, text and raw-token readers,
// windows with a validation split, and the per-epoch shuffle.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "data/token_corpus.h"
#include "unit/gguf_blueprint.h"
#include "unit/mini_checkpoint.h"
#include "unit/test_assertions.h"

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
  EXPECT_EQ(tokenizer->eos_id, testing::kMiniEndOfText);       // no <eos>: <|endoftext|>
  EXPECT_EQ(tokenizer->bos_id, testing::kMiniEndOfText);
  EXPECT_FALSE(tokenizer->tokenizer_config_json.empty());      // the neighbouring file was read

  // Each file is one document followed by the end token, special-token text kept as text.
  const std::string text = "hello <|im_end|> world";
  write_bytes(dir.file("a.txt"), text);
  auto tokens = read_text_corpus({dir.file("a.txt"), dir.file("a.txt")}, *tokenizer, nullptr);
  ASSERT_TRUE(tokens.ok()) << tokens.message();
  ASSERT_EQ(std::count(tokens->begin(), tokens->end(), testing::kMiniEndOfText), 2);
  EXPECT_EQ(tokens->back(), testing::kMiniEndOfText);
  EXPECT_EQ(std::count(tokens->begin(), tokens->end(), testing::kMiniImEnd), 0);
  const std::vector<uint32_t> first(tokens->begin(), tokens->begin() + long(tokens->size() / 2 - 1));
  auto decoded = tokenizer->tokenizer.decode(first);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, text);
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

TEST(TokenCorpus, RawTokenFiles) {
  testing::TempDir dir;
  write_bytes(dir.file("u16.bin"), std::string("\x01\x00\x02\x01", 4));
  auto u16 = read_token_files({dir.file("u16.bin")}, TokenFileType::U16, 1000);
  ASSERT_TRUE(u16.ok()) << u16.message();
  EXPECT_EQ(*u16, (std::vector<uint32_t>{1, 258}));
  auto u32 = read_token_files({dir.file("u16.bin")}, TokenFileType::U32, 1u << 30);
  ASSERT_TRUE(u32.ok());
  EXPECT_EQ(*u32, (std::vector<uint32_t>{0x01020001u}));

  write_bytes(dir.file("odd.bin"), std::string("\x01\x00\x02", 3));
  auto odd = read_token_files({dir.file("odd.bin")}, TokenFileType::U16, 1000);
  ASSERT_FALSE(odd.ok());
  EXPECT_TRUE(has_substr(odd.message(), "not a whole number of 2-byte token ids"));
  auto big = read_token_files({dir.file("u16.bin")}, TokenFileType::U16, 100);
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(has_substr(big.message(), "token 1 has id 258, not below the vocabulary size 100"));
}

TEST(TokenCorpus, WindowsAndValidationSplit) {
  std::vector<uint32_t> tokens(101);
  for (uint32_t i = 0; i < tokens.size(); ++i) tokens[i] = i;
  auto windows = TokenWindows::create(tokens, 10, 0.2);  // 10 windows of 11 tokens, stride 10
  ASSERT_TRUE(windows.ok()) << windows.message();
  EXPECT_EQ(windows->train_count(), 8u);
  EXPECT_EQ(windows->validation_count(), 2u);
  std::vector<int32_t> inputs(10), targets(10);
  windows->fill_train(3, inputs.data(), targets.data());
  EXPECT_EQ(inputs.front(), 30);
  EXPECT_EQ(targets.back(), 40);  // the next window's first input: every token is predicted once
  windows->fill_validation(1, inputs.data(), targets.data());
  EXPECT_EQ(inputs.front(), 90);
  EXPECT_EQ(targets.back(), 100);

  auto too_short = TokenWindows::create(std::vector<uint32_t>(10, 1), 10, 0.0);
  ASSERT_FALSE(too_short.ok());
  EXPECT_TRUE(has_substr(too_short.message(), "too few for one training window of 11 tokens"));
  // One window, but a validation split wants one more.
  EXPECT_FALSE(TokenWindows::create(std::vector<uint32_t>(11, 1), 10, 0.1).ok());
  EXPECT_TRUE(TokenWindows::create(std::vector<uint32_t>(11, 1), 10, 0.0).ok());
}

TEST(TokenCorpus, EpochOrderIsASeededPermutation) {
  const auto order = epoch_order(1000, 7, 0);
  std::vector<uint64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(order, epoch_order(1000, 7, 0));  // a pure function of (seed, epoch)
  EXPECT_NE(order, epoch_order(1000, 7, 1));
  EXPECT_NE(order, epoch_order(1000, 8, 0));
  size_t fixed_points = 0;
  for (uint64_t i = 0; i < order.size(); ++i) fixed_points += order[i] == i;
  EXPECT_LT(fixed_points, 10u);  // a shuffle keeps ~1 element in place on average
  EXPECT_TRUE(epoch_order(0, 7, 0).empty());
  EXPECT_EQ(epoch_order(1, 7, 3), std::vector<uint64_t>{0});
}

}  // namespace
}  // namespace kipp::data
