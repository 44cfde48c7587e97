// Reads a Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) into the GGUF form.
// tokenizer_config.json's added_tokens_decoder is merged over tokenizer.json's added tokens,
// as transformers does; without it <think>, </think> and <tool_response> would mis-tokenize.
#pragma once

#include <string>

#include "core/status.h"
#include "model/tokenizer_metadata.h"
#include "tokenizer/pretokenizer_pattern.h"

namespace kipp {

struct HfTokenizerFiles {
  std::string tokenizer_json;         // text of tokenizer.json
  std::string tokenizer_config_json;  // text of tokenizer_config.json, may be empty
};

// `vocab_size` is the embedding row count; the vocabulary is padded to it with unused tokens.
// `eos_token_id` is the model's end token (config.json), `padding_token_id` its pad token.
Expected<TokenizerMetadata> import_hf_tokenizer(const HfTokenizerFiles& files, uint32_t vocab_size,
                                                uint32_t bos_token_id, uint32_t eos_token_id);

}  // namespace kipp
