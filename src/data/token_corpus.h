// The training corpus as one token stream cut into fixed windows, and the tokenizer a run
// trains with. Everything is held in memory (streaming readers and a pre-tokenized cache are
// the data pipeline's next step).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace kipp::data {

struct TrainingTokenizer {
  Tokenizer tokenizer;
  std::string tokenizer_json;         // verbatim, copied into every checkpoint
  std::string tokenizer_config_json;  // the neighbouring tokenizer_config.json, or empty
  uint32_t vocab_size = 0;            // highest id + 1 (vocabulary and added tokens)
  uint32_t bos_id = 0;
  uint32_t eos_id = 0;                // separates documents in the token stream
};

// An HF tokenizer.json (byte-level BPE). The end-of-document token is the first added token
// of <eos>, <|endoftext|>, </s>; the begin token <bos> when present, else the same token.
Expected<TrainingTokenizer> load_training_tokenizer(const std::string& tokenizer_json_path);

enum class TokenFileType { U16, U32 };

// "text": each file is one document, tokenized (special tokens as plain text) and followed by
// the end token. "tokens": raw little-endian ids (nanoGPT/llm.c .bin), concatenated as they are.
// Every id must be below `vocab_size`. `progress` gets one line per file.
Expected<std::vector<uint32_t>> read_text_corpus(const std::vector<std::string>& files, const TrainingTokenizer& tokenizer,
                                                 const std::function<void(const std::string&)>& progress);
Expected<std::vector<uint32_t>> read_token_files(const std::vector<std::string>& files, TokenFileType type,
                                                 uint32_t vocab_size);

// The stream cut into windows of seq_len + 1 tokens at a stride of seq_len (input = window[0..n),
// target = window[1..n]); the last `validation_fraction` of the windows are held out.
class TokenWindows {
 public:
  static Expected<TokenWindows> create(std::vector<uint32_t> tokens, uint32_t seq_len, double validation_fraction);

  uint64_t train_count() const { return train_count_; }
  uint64_t validation_count() const { return validation_count_; }
  uint32_t seq_len() const { return seq_len_; }

  // Writes seq_len inputs and targets of training window `index` (< train_count) or of
  // validation window `index` (< validation_count).
  void fill_train(uint64_t index, int32_t* inputs, int32_t* targets) const;
  void fill_validation(uint64_t index, int32_t* inputs, int32_t* targets) const;

 private:
  TokenWindows(std::vector<uint32_t> tokens, uint32_t seq_len, uint64_t train, uint64_t validation)
      : tokens_(std::move(tokens)), seq_len_(seq_len), train_count_(train), validation_count_(validation) {}
  void fill(uint64_t window, int32_t* inputs, int32_t* targets) const;

  std::vector<uint32_t> tokens_;
  uint32_t seq_len_;
  uint64_t train_count_, validation_count_;
};

// The order of `count` training windows in `epoch`: a Fisher-Yates shuffle driven by a
// counter-based generator keyed by (seed, epoch), so a run resumed at (epoch, cursor) sees
// exactly the windows an uninterrupted run would.
std::vector<uint64_t> epoch_order(uint64_t count, uint64_t seed, uint64_t epoch);

}  // namespace kipp::data
