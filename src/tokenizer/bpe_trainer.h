// Byte-level BPE training for the Qwen2 tokenizer pipeline: the text is split exactly as the
// encoder splits it (added tokens matched in the raw text and left out, then NFC, the Qwen2
// split regex, the GPT-2 byte-to-unicode map), pre-token ("word") frequencies are counted on
// several threads, and merges are learned from the 256 byte symbols up.
//
// The merge loop picks the most frequent adjacent pair, counted over word types weighted by
// their frequency. Ties go to the pair with the smaller (left id, right id), ids being
// vocabulary order: the 256 bytes by the code point of their byte-level character (the order
// Qwen's vocabulary has: "!" is 0, "Ġ" is 220), then tokens in the order they were learned.
// That is the order Hugging Face's BpeTrainer uses on ties as well. A merge whose result is
// already a token (another pair spelled it first) is recorded but adds no vocabulary entry.
//
// Pair counts live in a table with, per pair, the words that (may) hold it; a max-heap of
// (count, pair) entries is invalidated lazily (an entry whose count is stale is re-pushed with
// the current count when it reaches the top). After a merge only the words of the merged pair
// are rescanned and only the pairs next to each occurrence change.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kipp {

// <pad> <unk> <bos> <eos> <mask> <|im_start|> <|im_end|>, in id order after the vocabulary.
const std::vector<std::string>& default_special_tokens();

struct BpeTrainingProgress {
  enum class Phase { Counting, Merging };
  Phase phase = Phase::Counting;
  uint64_t done = 0;   // bytes counted, or merges learned
  uint64_t total = 0;  // bytes of all inputs, or merges wanted
};
using BpeProgressCallback = std::function<void(const BpeTrainingProgress&)>;

// Pre-token frequencies: raw bytes of each piece (after NFC, before the byte-level map).
struct WordCounts {
  std::vector<std::pair<std::string, uint64_t>> words;  // sorted by bytes, counts > 0
  uint64_t bytes = 0;                                   // input bytes read
  uint64_t pieces = 0;                                  // pre-tokens counted (with repeats)
};

struct WordCountOptions {
  std::vector<std::string> special_tokens;  // matched in the raw text and not counted
  size_t threads = 0;                       // 0: one per hardware thread
  size_t block_bytes = size_t{32} << 20;    // read this much per step (tests use less)
};

// Streams the files in blocks, cuts each block into one chunk per thread at line starts that
// cannot change the split ("\n" followed by a printable ASCII character: no pre-token and no
// NFC composition crosses such a point), and counts each chunk into the thread's own table.
// The result does not depend on the thread count or the block size. Memory: the tables plus
// about two blocks (more only while a block holds no such line start). Invalid UTF-8 is an
// error naming the file and the byte offset.
Expected<WordCounts> count_words_in_files(const std::vector<std::string>& files, const WordCountOptions& options,
                                          const BpeProgressCallback& progress = {});
// The same for text in memory (one document).
Expected<WordCounts> count_words_in_text(std::string_view text, const WordCountOptions& options);

struct BpeMergeOptions {
  uint32_t vocab_size = 0;  // everything: 256 bytes + learned tokens + special tokens
  std::vector<std::string> special_tokens;
  uint64_t min_frequency = 2;  // no pair seen fewer times than this is merged
};

struct TrainedTokenizer {
  std::vector<std::string> vocab;                     // by id, byte-level text ("Ġthe")
  std::vector<std::pair<uint32_t, uint32_t>> merges;  // (left id, right id), rank order
  std::vector<std::string> special_tokens;            // id vocab.size() + index
  bool stopped_early = false;                         // ran out of pairs at min_frequency before reaching vocab_size

  uint32_t total_size() const { return static_cast<uint32_t>(vocab.size() + special_tokens.size()); }
};

// Checks vocab_size and the special tokens: each non-empty, valid UTF-8, distinct, without a
// line break, and not a single pre-token (so it can never also be a byte or learned token).
Status check_bpe_options(const BpeMergeOptions& options);

// Learns merges from counted words. Errors only for invalid options.
Expected<TrainedTokenizer> train_bpe(const WordCounts& counts, const BpeMergeOptions& options,
                                     const BpeProgressCallback& progress = {});

// The 256 byte tokens and the special tokens, no merges: encodes any text, one token per byte.
Expected<TrainedTokenizer> byte_level_tokenizer(const std::vector<std::string>& special_tokens);

}  // namespace kipp
