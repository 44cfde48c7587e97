// BPE training: hand-computed merges, the efficient trainer against a naive one on random
// corpora, tie-breaking, thread- and block-independent counting, the vocabulary size, special
// tokens, errors, and the written tokenizer.json loaded by the project's own loader.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "data/training_tokenizer.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenizer_pattern.h"
#include "tokenizer/tokenizer_json_writer.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/test_assertions.h"

namespace kipp {
namespace {

using kipp::test_support::has_substr;

// ASCII printable bytes have ids byte - 0x21 ("!" is 0, "a" is 64).
constexpr uint32_t id_of(char c) { return static_cast<uint32_t>(c) - 0x21; }

WordCounts words(std::vector<std::pair<std::string, uint64_t>> list) {
  WordCounts counts;
  counts.words = std::move(list);
  std::sort(counts.words.begin(), counts.words.end());
  return counts;
}

std::vector<std::string> merge_texts(const TrainedTokenizer& t) {
  std::vector<std::string> out;
  for (const auto& [l, r] : t.merges) out.push_back(t.vocab[l] + " " + t.vocab[r]);
  return out;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// The textbook algorithm, with no incremental bookkeeping: every step recounts every pair.
TrainedTokenizer naive_bpe(const WordCounts& counts, uint32_t vocab_size, uint64_t min_frequency,
                           const std::vector<std::string>& specials) {
  auto base = byte_level_tokenizer({});
  TrainedTokenizer out = std::move(*base);
  std::map<std::string, uint32_t> ids;
  for (uint32_t id = 0; id < out.vocab.size(); ++id) ids[out.vocab[id]] = id;
  std::vector<std::pair<std::vector<uint32_t>, uint64_t>> ws;
  for (const auto& [text, count] : counts.words) {
    std::vector<uint32_t> symbols;
    for (const char c : text) symbols.push_back(ids.at(std::string(byte_level::byte_to_text(static_cast<uint8_t>(c)))));
    ws.emplace_back(symbols, count);
  }
  while (out.vocab.size() + specials.size() < vocab_size) {
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> pairs;
    for (const auto& [s, count] : ws) {
      for (size_t i = 0; i + 1 < s.size(); ++i) pairs[{s[i], s[i + 1]}] += count;
    }
    std::pair<uint32_t, uint32_t> best{};
    uint64_t best_count = 0;
    for (const auto& [pair, count] : pairs) {  // in ascending pair order: strict > keeps the smallest
      if (count > best_count) best = pair, best_count = count;
    }
    if (best_count < std::max<uint64_t>(min_frequency, 1)) {
      out.stopped_early = true;
      break;
    }
    const std::string text = out.vocab[best.first] + out.vocab[best.second];
    uint32_t c;
    if (ids.count(text)) {
      c = ids[text];
    } else {
      c = static_cast<uint32_t>(out.vocab.size());
      out.vocab.push_back(text);
      ids[text] = c;
    }
    out.merges.push_back(best);
    for (auto& [s, count] : ws) {
      std::vector<uint32_t> merged;
      for (size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == best.first && s[i + 1] == best.second) {
          merged.push_back(c);
          i += 2;
        } else {
          merged.push_back(s[i++]);
        }
      }
      s = std::move(merged);
    }
  }
  out.special_tokens = specials;
  return out;
}

TEST(BpeTrainer, HandComputedMerges) {
  // "aaabdaaabac": (a a) x4 first; then (a b) and (aa a) tie at 2 and (a b) has the smaller
  // ids (64, 65) < (256, 64); then (aa ab) x2; every pair left occurs once.
  const WordCounts counts = words({{"aaabdaaabac", 1}});
  auto trained = train_bpe(counts, {.vocab_size = 1000, .special_tokens = {}, .min_frequency = 2});
  ASSERT_TRUE(trained.ok()) << trained.message();
  EXPECT_EQ(merge_texts(*trained), (std::vector<std::string>{"a a", "a b", "aa ab"}));
  ASSERT_EQ(trained->vocab.size(), 259u);
  EXPECT_EQ(trained->vocab[256], "aa");
  EXPECT_EQ(trained->vocab[257], "ab");
  EXPECT_EQ(trained->vocab[258], "aaab");
  EXPECT_EQ(trained->merges[0], std::make_pair(id_of('a'), id_of('a')));
  EXPECT_EQ(trained->merges[2], std::make_pair(256u, 257u));
  EXPECT_TRUE(trained->stopped_early);

  // With min_frequency 1 the singletons follow, smallest ids first: (a c) = (64, 66).
  auto all = train_bpe(counts, {.vocab_size = 260, .special_tokens = {}, .min_frequency = 1});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(merge_texts(*all), (std::vector<std::string>{"a a", "a b", "aa ab", "a c"}));
  EXPECT_FALSE(all->stopped_early);
}

TEST(BpeTrainer, WeightsWordsByFrequencyAndMapsBytes) {
  // " the" x5 beats "ab" x3; within it (Ġ t) (t h) (h e) tie and (h e) = (71, 68) has the
  // smallest ids; the space is "Ġ" (id 220 in Qwen's order).
  const WordCounts counts = words({{" the", 5}, {"ab", 3}});
  auto trained = train_bpe(counts, {.vocab_size = 256 + 4, .special_tokens = {}, .min_frequency = 2});
  ASSERT_TRUE(trained.ok());
  EXPECT_EQ(merge_texts(*trained), (std::vector<std::string>{"h e", "t he", "Ġ the", "a b"}));
  EXPECT_EQ(trained->merges[2].first, 220u);
  EXPECT_EQ(trained->vocab[259], "ab");
}

TEST(BpeTrainer, TiesGoToTheSmallerIdsWhateverTheWordOrder) {
  WordCounts counts = words({{"zy", 3}, {"cd", 3}, {"ab", 3}, {"yx", 3}});
  auto trained = train_bpe(counts, {.vocab_size = 1000, .special_tokens = {}, .min_frequency = 2});
  ASSERT_TRUE(trained.ok());
  EXPECT_EQ(merge_texts(*trained), (std::vector<std::string>{"a b", "c d", "y x", "z y"}));
  std::reverse(counts.words.begin(), counts.words.end());
  auto reversed = train_bpe(counts, {.vocab_size = 1000, .special_tokens = {}, .min_frequency = 2});
  ASSERT_TRUE(reversed.ok());
  EXPECT_EQ(reversed->merges, trained->merges);
}

TEST(BpeTrainer, OverlappingRunsCountedLikeTheNaiveAlgorithm) {
  // Runs of one letter: (a a) occurrences overlap; "abab" gives (b a) once and (ab ab) once.
  const WordCounts counts = words({{"aaaaa", 3}, {"aaaa", 2}, {"abab", 4}, {"ababab", 1}, {"aab", 2}});
  for (uint64_t min_frequency : {1, 2}) {
    auto fast = train_bpe(counts, {.vocab_size = 300, .special_tokens = {}, .min_frequency = min_frequency});
    ASSERT_TRUE(fast.ok());
    const TrainedTokenizer slow = naive_bpe(counts, 300, min_frequency, {});
    EXPECT_EQ(merge_texts(*fast), merge_texts(slow)) << "min_frequency " << min_frequency;
    EXPECT_EQ(fast->vocab, slow.vocab);
  }
}

TEST(BpeTrainer, MatchesTheNaiveAlgorithmOnRandomCorpora) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 12; ++round) {
    // Few letters so pairs repeat, merges chain and spellings collide ("ab"+"c" vs "a"+"bc").
    const std::string alphabet = round % 2 ? "abc" : "abcdeé ";
    std::map<std::string, uint64_t> list;
    const int n_words = 20 + round * 15;
    for (int w = 0; w < n_words; ++w) {
      std::string word;
      const int length = 1 + static_cast<int>(rng() % 9);
      for (int i = 0; i < length; ++i) word += alphabet[rng() % alphabet.size()];
      list[word] += 1 + rng() % 7;
    }
    const WordCounts counts = words({list.begin(), list.end()});
    const uint64_t min_frequency = round % 3;
    const uint32_t vocab_size = 256 + 3 + static_cast<uint32_t>(rng() % 120);
    const std::vector<std::string> specials{"<a>", "<b>", "<c>"};
    auto fast =
        train_bpe(counts, {.vocab_size = vocab_size, .special_tokens = specials, .min_frequency = min_frequency});
    ASSERT_TRUE(fast.ok()) << fast.message();
    const TrainedTokenizer slow = naive_bpe(counts, vocab_size, min_frequency, specials);
    ASSERT_EQ(merge_texts(*fast), merge_texts(slow)) << "round " << round;
    EXPECT_EQ(fast->vocab, slow.vocab);
    EXPECT_EQ(fast->stopped_early, slow.stopped_early);
    if (!fast->stopped_early) {
      EXPECT_EQ(fast->total_size(), vocab_size);
    }
  }
}

TEST(BpeTrainer, VocabSizeCountsBytesMergesAndSpecials) {
  auto counts = count_words_in_text(std::string(200, 'x') + " the quick brown fox jumps over the lazy dog", {});
  ASSERT_TRUE(counts.ok());
  const auto& specials = default_special_tokens();
  for (uint32_t size : {263u, 264u, 270u, 280u}) {
    auto trained = train_bpe(*counts, {.vocab_size = size, .special_tokens = specials, .min_frequency = 1});
    ASSERT_TRUE(trained.ok());
    EXPECT_EQ(trained->total_size(), size);
    EXPECT_EQ(trained->vocab.size(), size - specials.size());
  }
  auto too_small = train_bpe(*counts, {.vocab_size = 262, .special_tokens = specials, .min_frequency = 1});
  ASSERT_FALSE(too_small.ok());
  EXPECT_TRUE(has_substr(too_small.message(),
                         "--vocab-size 262 is too small: the 256 byte tokens and 7 special tokens need 263"));
}

TEST(BpeTrainer, RejectsBadSpecialTokens) {
  auto check = [](std::vector<std::string> specials) {
    return check_bpe_options({.vocab_size = 1000, .special_tokens = std::move(specials), .min_frequency = 2});
  };
  EXPECT_TRUE(check({"<pad>", "<|im_start|>", "[CLS]", "</s>"}).ok());
  EXPECT_TRUE(has_substr(check({"<a>", "<a>"}).message(), "special token '<a>' is given twice"));
  EXPECT_TRUE(has_substr(check({""}).message(), "special token 0 is empty"));
  EXPECT_TRUE(has_substr(check({"<a\n>"}).message(), "holds a line break"));
  EXPECT_TRUE(has_substr(check({"hello"}).message(), "special token 'hello' is a single pre-token"));
  EXPECT_TRUE(has_substr(check({"\xFF"}).message(), "special token 0 is not valid UTF-8"));
}

TEST(BpeWordCounts, SplitsLikeTheEncoderAndLeavesSpecialTokensOut) {
  auto counts = count_words_in_text("Hello world<eos>Hello  world\n\nit's 42", {.special_tokens = {"<eos>"}});
  ASSERT_TRUE(counts.ok()) << counts.message();
  const std::vector<std::pair<std::string, uint64_t>> expected{{"\n\n", 1}, {" ", 2}, {" world", 2}, {"'s", 1},
                                                               {"2", 1},    {"4", 1}, {"Hello", 2},  {"it", 1}};
  EXPECT_EQ(counts->words, expected);
  EXPECT_EQ(counts->pieces, 11u);
  // NFC first: "e" + U+0301 is counted as "é".
  auto nfc = count_words_in_text(
      "caf"
      "e\xCC\x81",
      {});
  ASSERT_TRUE(nfc.ok());
  ASSERT_EQ(nfc->words.size(), 1u);
  EXPECT_EQ(nfc->words[0].first, "caf\xC3\xA9");
}

TEST(BpeWordCounts, ThreadsAndBlocksDoNotChangeTheCounts) {
  testing::TempDir dir;
  std::string text;
  std::mt19937 rng(7);
  const std::vector<std::string> parts{
      "the ",       "cat",    "\n",     "\n\n",  "  ",         "\t",        "It's ",
      "42",         "naïve ", "日本語", "<eos>", "x\n",        " \n y",     "🙂",
      "e\xCC\x81",  "\r\n",   "!!",     "\n)",   "\n\xCC\x81", "\nпривет ", "\n\xE3\x80\x80x",
      "\n\xC2\xA0", "\n日"};
  for (int i = 0; i < 4000; ++i) text += parts[rng() % parts.size()];
  write_bytes(dir.file("a.txt"), text);
  const std::string prefix = text.substr(0, text.find("\nx", 1000) + 1);  // whole characters
  write_bytes(dir.file("b.txt"), prefix);
  const std::vector<std::string> files{dir.file("a.txt"), dir.file("b.txt")};
  auto reference = count_words_in_files(files, {.special_tokens = {"<eos>"}, .threads = 1, .block_bytes = 1 << 20});
  ASSERT_TRUE(reference.ok()) << reference.message();
  auto in_memory_a = count_words_in_text(text, {.special_tokens = {"<eos>"}});
  auto in_memory_b = count_words_in_text(prefix, {.special_tokens = {"<eos>"}});
  ASSERT_TRUE(in_memory_a.ok() && in_memory_b.ok());
  std::map<std::string, uint64_t> sum;
  for (const auto& [w, c] : in_memory_a->words) sum[w] += c;
  for (const auto& [w, c] : in_memory_b->words) sum[w] += c;
  EXPECT_EQ(reference->words, (std::vector<std::pair<std::string, uint64_t>>(sum.begin(), sum.end())));
  EXPECT_EQ(reference->bytes, text.size() + prefix.size());
  for (size_t threads : {1, 2, 3}) {
    for (size_t block : {1, 7, 100, 4096}) {
      auto counts =
          count_words_in_files(files, {.special_tokens = {"<eos>"}, .threads = threads, .block_bytes = block});
      ASSERT_TRUE(counts.ok()) << counts.message();
      EXPECT_EQ(counts->words, reference->words) << threads << " threads, block " << block;
      EXPECT_EQ(counts->pieces, reference->pieces);
    }
  }
}

TEST(BpeWordCounts, ErrorsNameTheFileAndOffset) {
  testing::TempDir dir;
  write_bytes(dir.file("bad.txt"),
              "line one\nline two\nab\xFF"
              "cd\n");
  for (size_t block : {3, 1 << 20}) {
    auto counts =
        count_words_in_files({dir.file("bad.txt")}, {.special_tokens = {}, .threads = 2, .block_bytes = block});
    ASSERT_FALSE(counts.ok());
    EXPECT_EQ(counts.message(), dir.file("bad.txt") + ": invalid UTF-8 at byte offset 20 (byte 0xFF)");
  }
  auto missing = count_words_in_files({dir.file("nope.txt")}, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(has_substr(missing.message(), "cannot read " + dir.file("nope.txt") + ": No such file"));
}

// Writes tokenizer.json and tokenizer_config.json and loads them as `kipp train` does.
Expected<data::TrainingTokenizer> write_and_load(const TrainedTokenizer& trained, const testing::TempDir& dir) {
  KIPP_RETURN_IF_ERROR(write_text_file_atomic(dir.file("tokenizer.json"), to_tokenizer_json(trained)));
  KIPP_RETURN_IF_ERROR(write_text_file_atomic(dir.file("tokenizer_config.json"), to_tokenizer_config_json(trained)));
  return data::load_training_tokenizer(dir.file("tokenizer.json"));
}

std::string random_utf8(std::mt19937& rng, size_t length) {
  std::string out;
  for (size_t i = 0; i < length; ++i) {
    const auto r = static_cast<uint32_t>(rng());
    uint32_t cp;
    switch (r % 5) {
      case 0: cp = 0x20 + r / 5 % 0x5F; break;
      case 1: cp = static_cast<uint32_t>("\n\t \r"[r / 5 % 4]); break;
      case 2: cp = 0xA0 + r / 5 % 0x700; break;
      case 3: cp = 0x3000 + r / 5 % 0x6000; break;
      default: cp = 0x1F300 + r / 5 % 0x300; break;
    }
    if (cp >= 0xD800 && cp < 0xE000) cp = 'x';
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

TEST(BpeTokenizerJson, ByteLevelTokenizerEncodesAnyText) {
  auto trained = byte_level_tokenizer(default_special_tokens());
  ASSERT_TRUE(trained.ok());
  EXPECT_EQ(trained->total_size(), 263u);
  testing::TempDir dir;
  auto loaded = write_and_load(*trained, dir);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(loaded->vocab_size, 263u);
  EXPECT_EQ(loaded->bos_id, 258u);  // <pad> <unk> <bos> <eos> ... from 256
  EXPECT_EQ(loaded->eos_id, 259u);
  std::mt19937 rng(99);
  for (int i = 0; i < 200; ++i) {
    const std::string text = random_utf8(rng, rng() % 60);
    auto ids = loaded->tokenizer.encode(text, SpecialTokens::PlainText);
    ASSERT_TRUE(ids.ok()) << ids.message();
    std::string storage;
    const std::string normalized(nfc(text, storage));
    EXPECT_EQ(ids->size(), normalized.size());  // one token per byte
    auto decoded = loaded->tokenizer.decode(*ids);
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, normalized);
  }
  auto special = loaded->tokenizer.encode("<|im_start|>hi<|im_end|>");
  ASSERT_TRUE(special.ok());
  EXPECT_EQ(*special, (std::vector<uint32_t>{261, id_of('h'), id_of('i'), 262}));
  EXPECT_TRUE(loaded->tokenizer.is_special_token(256));
}

TEST(BpeTokenizerJson, TrainedTokenizerLoadsAndEncodesTheTrainingWords) {
  std::string corpus;
  for (int i = 0; i < 50; ++i) corpus += "The tokenizer tokenizes tokens. It's 2024!\n  hello   world\n";
  auto counts = count_words_in_text(corpus, {.special_tokens = default_special_tokens()});
  ASSERT_TRUE(counts.ok());
  auto trained =
      train_bpe(*counts, {.vocab_size = 400, .special_tokens = default_special_tokens(), .min_frequency = 2});
  ASSERT_TRUE(trained.ok());
  EXPECT_TRUE(trained->stopped_early);  // every word became one token
  testing::TempDir dir;
  auto loaded = write_and_load(*trained, dir);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  const uint32_t first_special = static_cast<uint32_t>(trained->vocab.size());
  EXPECT_EQ(loaded->vocab_size, first_special + 7);
  EXPECT_EQ(loaded->eos_id, first_special + 3);
  for (const auto& [word, count] : counts->words) {
    auto ids = loaded->tokenizer.encode(word);
    ASSERT_TRUE(ids.ok());
    ASSERT_EQ(ids->size(), 1u) << word;
    auto piece = loaded->tokenizer.token_to_piece((*ids)[0]);
    ASSERT_TRUE(piece.ok());
    EXPECT_EQ(*piece, byte_level::encode(word));
  }
  auto ids = loaded->tokenizer.encode(corpus);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->size(), counts->pieces);
  std::mt19937 rng(5);
  for (int i = 0; i < 100; ++i) {
    const std::string text = random_utf8(rng, rng() % 80) + "tokenizes hello";
    auto encoded = loaded->tokenizer.encode(text + "<eos>");
    ASSERT_TRUE(encoded.ok());
    EXPECT_EQ(encoded->back(), first_special + 3);
    auto decoded = loaded->tokenizer.decode(*encoded);
    ASSERT_TRUE(decoded.ok());
    std::string storage;
    EXPECT_EQ(*decoded, std::string(nfc(text, storage)) + "<eos>");
  }
}

TEST(BpeTokenizerJson, HasTheQwen2Pipeline) {
  auto trained = train_bpe(words({{"ab", 2}}), {.vocab_size = 1000, .special_tokens = {"<x>"}, .min_frequency = 2});
  ASSERT_TRUE(trained.ok());
  const auto json = nlohmann::json::parse(to_tokenizer_json(*trained));
  EXPECT_EQ(json["model"]["type"], "BPE");
  EXPECT_EQ(json["normalizer"]["type"], "NFC");
  EXPECT_EQ(json["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], kQwen2PretokenizerPattern);
  EXPECT_EQ(json["pre_tokenizer"]["pretokenizers"][0]["behavior"], "Isolated");
  EXPECT_EQ(json["pre_tokenizer"]["pretokenizers"][1]["use_regex"], false);
  EXPECT_EQ(json["decoder"]["type"], "ByteLevel");
  EXPECT_EQ(json["model"]["merges"], nlohmann::json::parse(R"([["a", "b"]])"));
  EXPECT_EQ(json["model"]["vocab"]["ab"], 256);
  EXPECT_EQ(json["model"]["vocab"]["Ġ"], 220);
  EXPECT_EQ(json["added_tokens"][0]["id"], 257);
  EXPECT_EQ(json["added_tokens"][0]["content"], "<x>");
  EXPECT_EQ(json["added_tokens"][0]["special"], true);
  const auto config = nlohmann::json::parse(to_tokenizer_config_json(*trained));
  EXPECT_EQ(config["tokenizer_class"], "Qwen2Tokenizer");
  EXPECT_EQ(config["added_tokens_decoder"]["257"]["content"], "<x>");
  EXPECT_TRUE(config["eos_token"].is_null());
  EXPECT_EQ(config["additional_special_tokens"], nlohmann::json::parse(R"(["<x>"])"));
}

}  // namespace
}  // namespace kipp
