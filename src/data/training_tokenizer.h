// The tokenizer a training run works with, from an HF tokenizer.json or a GGUF's metadata.
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
  std::string tokenizer_json;         // verbatim, copied into every checkpoint (empty from a GGUF)
  std::string tokenizer_config_json;  // the neighbouring tokenizer_config.json, or empty
  uint32_t vocab_size = 0;            // highest id + 1 (vocabulary and added tokens)
  uint32_t bos_id = 0;
  uint32_t eos_id = 0;  // separates documents in the token stream
  // Everything the encoding depends on, as text: what the token cache is keyed by.
  std::string fingerprint;
};

// An HF tokenizer.json (byte-level BPE) and the tokenizer_config.json beside it. The
// end-of-document token is the first added token of <eos>, <|endoftext|>, </s> (none: bos_id and
// eos_id are 0); the begin token <bos> when present, else the same token.
Expected<TrainingTokenizer> load_tokenizer_json(const std::string& tokenizer_json_path);

// The same, requiring an end-of-document token (training packs documents with it).
Expected<TrainingTokenizer> load_training_tokenizer(const std::string& tokenizer_json_path);

// The tokenizer a Kipp GGUF embeds.
Expected<TrainingTokenizer> tokenizer_from_metadata(const TokenizerMetadata& metadata);

// Width of the ids in raw token files (nanoGPT/llm.c .bin).
enum class TokenFileType { U16, U32 };

}  // namespace kipp::data
