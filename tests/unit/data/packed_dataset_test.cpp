// The data pipeline after the readers: records to tokens with loss masks, the pre-tokenized
// cache, packing into windows, the validation split, the window order and the unigram baseline.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "data/packed_dataset.h"
#include "data/record_tokens.h"
#include "data/token_cache.h"
#include "data/training_tokenizer.h"
#include "tokenizer/hf_tokenizer.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/mini_checkpoint.h"
#include "unit/helpers/test_assertions.h"

namespace kipp::data {
namespace {

using kipp::test_support::has_substr;
using kipp::testing::TempDir;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

class DataPipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kipp::testing::write_mini_checkpoint(dir_.path()).ok());
    auto loaded = load_training_tokenizer(dir_.file("tokenizer.json"));
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    tokenizer_ = std::make_unique<TrainingTokenizer>(std::move(*loaded));
  }

  std::vector<uint32_t> encode(const std::string& text) const {
    auto ids = tokenizer_->tokenizer.encode(text, SpecialTokens::PlainText);
    EXPECT_TRUE(ids.ok());
    return ids.ok() ? *ids : std::vector<uint32_t>{};
  }

  std::string decode(const std::vector<uint32_t>& ids) const {
    auto text = tokenizer_->tokenizer.decode(ids);
    EXPECT_TRUE(text.ok());
    return text.ok() ? *text : "";
  }

  Expected<TokenCache> cache_of(const CacheSource& source, const CacheEvents& events = {}) const {
    return TokenCache::open_or_build(dir_.file("cache"), source, *tokenizer_, events);
  }

  static std::vector<uint32_t> all_tokens(const TokenCache& cache) {
    std::vector<uint32_t> out(cache.size());
    cache.read(0, cache.size(), out.data());
    return out;
  }

  TempDir dir_;
  std::unique_ptr<TrainingTokenizer> tokenizer_;
};

TEST_F(DataPipeline, TextDocumentsAreEncodedAndEndWithTheEndToken) {
  write_file(dir_.file("a.txt"), "first fortune\n%\nsecond one\nwith two lines\n%\n");
  write_file(dir_.file("b.txt"), "third <|im_end|> is text here\n");
  CacheSource source;
  source.inputs = {dir_.file("a.txt"), dir_.file("b.txt")};
  source.dataset.format = DatasetFormat::Text;
  source.dataset.document_separator = "%";
  auto cache = cache_of(source);
  ASSERT_TRUE(cache.ok()) << cache.message();
  EXPECT_TRUE(cache->built_now());
  std::vector<uint32_t> expected;
  for (const char* document : {"first fortune\n", "second one\nwith two lines\n", "third <|im_end|> is text here\n"}) {
    const std::vector<uint32_t> ids = encode(document);
    expected.insert(expected.end(), ids.begin(), ids.end());
    expected.push_back(tokenizer_->eos_id);
  }
  EXPECT_EQ(all_tokens(*cache), expected);  // every token carries loss: no kNoLossBit
  // Documents are untrusted text: control-token text stays text.
  EXPECT_EQ(std::count(expected.begin(), expected.end(), kipp::testing::kMiniImEnd), 0);
  EXPECT_EQ(cache->stats().documents, 3u);
  EXPECT_EQ(cache->stats().tokens, expected.size());
  EXPECT_EQ(cache->stats().counted, expected.size());
}

TEST_F(DataPipeline, CacheIsReusedAndRebuiltWhenAnInputChanges) {
  write_file(dir_.file("a.txt"), "some text for the cache\n");
  CacheSource source;
  source.inputs = {dir_.file("a.txt")};
  auto first = cache_of(source);
  ASSERT_TRUE(first.ok()) << first.message();
  auto again = cache_of(source);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_FALSE(again->built_now());
  EXPECT_EQ(again->dir(), first->dir());
  EXPECT_EQ(all_tokens(*again), all_tokens(*first));

  write_file(dir_.file("a.txt"), "different text, a different size\n");
  auto changed = cache_of(source);
  ASSERT_TRUE(changed.ok()) << changed.message();
  EXPECT_TRUE(changed->built_now());
  EXPECT_NE(changed->dir(), first->dir());
  std::vector<uint32_t> expected = encode("different text, a different size\n");
  expected.push_back(tokenizer_->eos_id);
  EXPECT_EQ(all_tokens(*changed), expected);

  CacheSource other_options = source;
  other_options.dataset.document_separator = "%";
  auto other = cache_of(other_options);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->dir(), changed->dir());
}

TEST_F(DataPipeline, ContentHashNamesTheTokensNotTheFiles) {
  write_file(dir_.file("a.txt"), "the same words\n");
  write_file(dir_.file("b.txt"), "the same words\n");
  CacheSource source;
  source.inputs = {dir_.file("a.txt")};
  auto a = cache_of(source);
  source.inputs = {dir_.file("b.txt")};
  auto b = cache_of(source);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->dir(), b->dir());  // another file: another cache
  EXPECT_EQ(a->content_hash(), b->content_hash());
  write_file(dir_.file("b.txt"), "other words here\n");
  auto changed = cache_of(source);
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->content_hash(), a->content_hash());
}

TEST_F(DataPipeline, StrictModeRefusesACacheBuiltWithSkippedRecords) {
  write_file(dir_.file("d.jsonl"), "{\"text\": \"good\"}\n{\"text\": 5}\n");
  CacheSource source;
  source.inputs = {dir_.file("d.jsonl")};
  std::vector<std::string> messages;
  CacheEvents events;
  events.on_message = [&](const std::string& line) { messages.push_back(line); };
  auto lenient = cache_of(source, events);
  ASSERT_TRUE(lenient.ok()) << lenient.message();
  EXPECT_EQ(lenient->stats().malformed, 1u);
  ASSERT_FALSE(messages.empty());
  EXPECT_TRUE(has_substr(messages[0], "d.jsonl:2")) << messages[0];
  source.dataset.strict = true;
  auto strict = cache_of(source);
  ASSERT_FALSE(strict.ok());
  EXPECT_TRUE(has_substr(strict.message(), "strict")) << strict.message();
}

// The cache is keyed by what encoding depends on: a GGUF's vocabulary and merges.
TEST_F(DataPipeline, GgufTokenizersAreFingerprintedByVocabularyAndMerges) {
  HfTokenizerFiles files{tokenizer_->tokenizer_json, tokenizer_->tokenizer_config_json};
  auto metadata = import_hf_tokenizer(files, tokenizer_->vocab_size, tokenizer_->bos_id, tokenizer_->eos_id);
  ASSERT_TRUE(metadata.ok()) << metadata.message();
  ASSERT_FALSE(metadata->merges.empty());
  TokenizerMetadata fewer_merges = *metadata;
  fewer_merges.merges.pop_back();
  auto first = tokenizer_from_metadata(*metadata);
  auto again = tokenizer_from_metadata(*metadata);
  auto second = tokenizer_from_metadata(fewer_merges);
  ASSERT_TRUE(first.ok() && again.ok() && second.ok());
  EXPECT_EQ(first->fingerprint, again->fingerprint);
  EXPECT_NE(first->fingerprint, second->fingerprint);
  EXPECT_EQ(first->eos_id, tokenizer_->eos_id);
  EXPECT_TRUE(has_substr(tokenizer_->fingerprint, tokenizer_->tokenizer_json));
}

TEST_F(DataPipeline, CorruptCacheIndexIsAClearError) {
  write_file(dir_.file("a.txt"), "text\n");
  CacheSource source;
  source.inputs = {dir_.file("a.txt")};
  auto cache = cache_of(source);
  ASSERT_TRUE(cache.ok());
  write_file(cache->dir() + "/index.json", "{\"version\": \"one\", \"shards\": 7}");
  auto broken = cache_of(source);
  ASSERT_FALSE(broken.ok());
  EXPECT_TRUE(has_substr(broken.message(), "delete")) << broken.message();
  write_file(
      cache->dir() + "/index.json",
      R"({"version": 1, "content_hash": "x", "stats": {"files": 1, "records": 1, "malformed": 0, "all_masked": 0, "documents": 1,
                 "tokens": 999, "counted": 999, "input_bytes": 5}, "shards": [{"file": "tokens-00000.bin", "tokens": 999}]})");
  broken = cache_of(source);
  ASSERT_FALSE(broken.ok());
  EXPECT_TRUE(has_substr(broken.message(), "tokens-00000.bin")) << broken.message();
}

TEST_F(DataPipeline, ShuffleBufferMixesWholeDocumentsDeterministically) {
  std::string text;
  std::vector<std::string> documents;
  for (int i = 0; i < 40; ++i) {
    documents.push_back("document number " + std::to_string(i) + "\n");
    text += documents.back() + "%\n";
  }
  write_file(dir_.file("docs.txt"), text);
  CacheSource source;
  source.inputs = {dir_.file("docs.txt")};
  source.dataset.document_separator = "%";
  source.shuffle_buffer = 8;
  source.shuffle_seed = 5;
  auto cache = cache_of(source);
  ASSERT_TRUE(cache.ok()) << cache.message();
  // Split the stream at end tokens back into documents.
  std::vector<std::string> seen;
  std::vector<uint32_t> current;
  for (uint32_t token : all_tokens(*cache)) {
    if (token == tokenizer_->eos_id) {
      seen.push_back(decode(current));
      current.clear();
    } else {
      current.push_back(token);
    }
  }
  EXPECT_TRUE(current.empty());
  EXPECT_NE(seen, documents);
  std::vector<std::string> sorted_seen = seen, sorted_documents = documents;
  std::sort(sorted_seen.begin(), sorted_seen.end());
  std::sort(sorted_documents.begin(), sorted_documents.end());
  EXPECT_EQ(sorted_seen, sorted_documents);

  auto again = TokenCache::open_or_build(dir_.file("other-cache"), source, *tokenizer_, {});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->built_now());
  EXPECT_EQ(all_tokens(*again), all_tokens(*cache));
}

TEST_F(DataPipeline, RawTokenFiles) {
  const std::vector<uint16_t> ids{1, 2, 3, 259, 0, 7};
  write_file(dir_.file("t.bin"), std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 2));
  CacheSource source;
  source.inputs = {dir_.file("t.bin")};
  source.raw_tokens = true;
  auto cache = cache_of(source);
  ASSERT_TRUE(cache.ok()) << cache.message();
  EXPECT_EQ(all_tokens(*cache), std::vector<uint32_t>(ids.begin(), ids.end()));

  const std::vector<uint16_t> too_big{1, 60000};
  write_file(dir_.file("big.bin"), std::string(reinterpret_cast<const char*>(too_big.data()), 4));
  source.inputs = {dir_.file("big.bin")};
  auto refused = cache_of(source);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(has_substr(refused.message(), "60000")) << refused.message();

  // llm.c: a 256 x int32 header (magic 20240520, version 1 = uint16, count) before the ids.
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = int32_t(ids.size());
  const std::string header_bytes(reinterpret_cast<const char*>(header.data()), 1024);
  write_file(dir_.file("llmc.bin"),
             header_bytes + std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 2));
  source.inputs = {dir_.file("llmc.bin")};
  auto llmc = cache_of(source);
  ASSERT_TRUE(llmc.ok()) << llmc.message();
  EXPECT_EQ(all_tokens(*llmc), std::vector<uint32_t>(ids.begin(), ids.end()));
  header[2] = 99;
  write_file(dir_.file("llmc-bad.bin"), std::string(reinterpret_cast<const char*>(header.data()), 1024) +
                                            std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 2));
  source.inputs = {dir_.file("llmc-bad.bin")};
  refused = cache_of(source);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(has_substr(refused.message(), "counts 99 tokens")) << refused.message();
  source.raw_type = TokenFileType::U32;
  source.inputs = {dir_.file("llmc.bin")};
  refused = cache_of(source);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(has_substr(refused.message(), "data.token_dtype")) << refused.message();
  source.raw_type = TokenFileType::U16;

  write_file(dir_.file("odd.bin"), "abc");
  source.inputs = {dir_.file("odd.bin")};
  refused = cache_of(source);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(has_substr(refused.message(), "whole number")) << refused.message();
}

TEST_F(DataPipeline, ConversationsCarryLossOnlyOnAssistantTurns) {
  Record record;
  record.messages = {{"system", "Be brief.", std::nullopt, {}},
                     {"user", "hi", std::nullopt, {}},
                     {"assistant", "hello there", std::nullopt, {}},
                     {"user", "bye", std::nullopt, {}},
                     {"assistant", "see you", std::nullopt, {}}};
  auto tokens = tokenize_record(record, *tokenizer_, RecordTokenOptions{});
  ASSERT_TRUE(tokens.ok()) << tokens.message();
  ChatOptions closed;
  closed.add_generation_prompt = false;
  auto whole = render_chat(ChatFormat::ChatML, record.messages, closed);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(tokens->rendered, *whole);
  EXPECT_EQ(decode(tokens->ids), *whole + decode({tokenizer_->eos_id}));
  std::string counted, context;
  for (size_t i = 0; i < tokens->ids.size(); ++i) {
    (tokens->counts[i] ? counted : context) += decode({tokens->ids[i]});
  }
  EXPECT_EQ(counted, "hello there<|im_end|>\nsee you<|im_end|>\n");
  EXPECT_EQ(tokens->ids.back(), tokenizer_->eos_id);
  EXPECT_EQ(tokens->counts.back(), 0);

  Record no_assistant;
  no_assistant.messages = {{"user", "only a question", std::nullopt, {}}};
  auto masked = tokenize_record(no_assistant, *tokenizer_, RecordTokenOptions{});
  ASSERT_TRUE(masked.ok());
  EXPECT_FALSE(masked->any_counted());
}

TEST_F(DataPipeline, WindowsTargetsMasksAndValidationTail) {
  // 2 documents of plain text plus a conversation: windows over the stored stream.
  write_file(dir_.file("chat.jsonl"),
             R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})"
             "\n"
             R"({"messages": [{"role": "user", "content": "no answer"}]})"
             "\n");
  CacheSource source;
  source.inputs = {dir_.file("chat.jsonl")};
  auto cache = cache_of(source);
  ASSERT_TRUE(cache.ok()) << cache.message();
  EXPECT_EQ(cache->stats().all_masked, 1u);
  const std::vector<uint32_t> stored = all_tokens(*cache);
  const uint32_t seq = 4;
  auto dataset = PackedDataset::create(std::move(*cache), std::nullopt, seq, 0.25);
  ASSERT_TRUE(dataset.ok()) << dataset.message();
  const uint64_t windows = (stored.size() - 1) / seq;
  ASSERT_GE(windows, 2u);
  EXPECT_EQ(dataset->validation_count(), std::max<uint64_t>(1, uint64_t(std::floor(double(windows) * 0.25))));
  EXPECT_EQ(dataset->train_count() + dataset->validation_count(), windows);
  std::vector<int32_t> inputs(seq), targets(seq);
  for (uint64_t w = 0; w < windows; ++w) {
    if (w < dataset->train_count()) {
      dataset->fill_train(w, inputs.data(), targets.data());
    } else {
      dataset->fill_validation(w - dataset->train_count(), inputs.data(), targets.data());
    }
    for (uint32_t i = 0; i < seq; ++i) {
      EXPECT_EQ(uint32_t(inputs[i]), stored[w * seq + i] & ~kNoLossBit);
      const uint32_t next = stored[w * seq + i + 1];
      EXPECT_EQ(targets[i], next & kNoLossBit ? kNoTarget : int32_t(next));
    }
  }
}

TEST_F(DataPipeline, TooLittleDataIsAClearError) {
  write_file(dir_.file("a.txt"), "ab");
  CacheSource source;
  source.inputs = {dir_.file("a.txt")};
  auto cache = cache_of(source);
  ASSERT_TRUE(cache.ok());
  auto dataset = PackedDataset::create(std::move(*cache), std::nullopt, 64, 0.1);
  ASSERT_FALSE(dataset.ok());
  EXPECT_TRUE(has_substr(dataset.message(), "seq_len")) << dataset.message();
}

TEST_F(DataPipeline, UnigramBaselineMatchesTheFormula) {
  const std::vector<uint16_t> ids{5, 5, 6, 5, 6, 7, 5, 5, 7, 6, 5, 8, 5};
  write_file(dir_.file("t.bin"), std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 2));
  CacheSource source;
  source.inputs = {dir_.file("t.bin")};
  source.raw_tokens = true;
  auto cache = cache_of(source);
  ASSERT_TRUE(cache.ok());
  // seq 3: windows [0..4) [3..7) [6..10) [9..13); the last one is validation.
  auto dataset = PackedDataset::create(std::move(*cache), std::nullopt, 3, 0.25);
  ASSERT_TRUE(dataset.ok());
  ASSERT_EQ(dataset->train_count(), 3u);
  std::map<uint32_t, double> counts;
  for (size_t i = 1; i <= 9; ++i) counts[ids[i]] += 1;  // training targets
  const double vocab = tokenizer_->vocab_size;
  double expected = 0;
  for (size_t i = 10; i <= 12; ++i) expected -= std::log((counts[ids[i]] + 1) / (9 + vocab));
  EXPECT_NEAR(dataset->unigram_baseline(tokenizer_->vocab_size), expected / 3, 1e-12);
}

TEST(WindowOrder, IsASeededPermutation) {
  for (uint64_t count : {1ull, 2ull, 3ull, 10ull, 1000ull, 4097ull}) {
    const WindowOrder order(count, 42, 0);
    std::vector<uint64_t> values;
    for (uint64_t i = 0; i < count; ++i) values.push_back(order[i]);
    std::set<uint64_t> distinct(values.begin(), values.end());
    EXPECT_EQ(distinct.size(), count);
    EXPECT_LT(*distinct.rbegin(), count);
    const WindowOrder same(count, 42, 0);
    for (uint64_t i = 0; i < count; ++i) ASSERT_EQ(same[i], values[i]);
  }
  const WindowOrder a(1000, 42, 0), next_epoch(1000, 42, 1), other_seed(1000, 43, 0);
  int same_epoch = 0, same_seed = 0, fixed_points = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    same_epoch += a[i] == next_epoch[i];
    same_seed += a[i] == other_seed[i];
    fixed_points += a[i] == i;
  }
  // A random permutation has about one fixed point and agrees with another at about one place.
  EXPECT_LT(same_epoch, 10);
  EXPECT_LT(same_seed, 10);
  EXPECT_LT(fixed_points, 10);
}

}  // namespace
}  // namespace kipp::data
