// The tokenizer as a GGUF file carries it (tokenizer.ggml.* and tokenizer.chat_template):
// byte-level BPE ("gpt2") with the Qwen2 pre-tokenizer, vocabulary padded to the embedding
// rows, merges in rank order, and the added tokens marked by type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"

namespace kipp {

enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct TokenizerMetadata {
  std::string model = "gpt2";
  std::string pre = "qwen2";
  std::vector<std::string> tokens;  // by id, padded to the vocabulary size
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;  // "left right", rank order
  uint32_t bos_token_id = 0;
  uint32_t eos_token_id = 0;
  uint32_t padding_token_id = 0;
  bool add_bos_token = false;
  std::optional<std::string> chat_template;
};

void add_tokenizer_metadata(GgufWriter& writer, const TokenizerMetadata& tokenizer);
// Reads and checks it against a vocabulary of `vocab_size` rows: token count, types, ids in
// range, model gpt2 and pre qwen2.
Expected<TokenizerMetadata> read_tokenizer_metadata(const GgufFile& file, uint32_t vocab_size);

}  // namespace kipp
