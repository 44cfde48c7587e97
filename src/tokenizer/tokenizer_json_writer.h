// A trained tokenizer as Hugging Face files: tokenizer.json in the layout of Qwen3's (BPE
// model with vocab and merges, NFC, the Qwen2 Split + ByteLevel pre-tokenizer, ByteLevel
// decoder, the special tokens as added tokens with special=true), which Kipp's converter and
// transformers load unchanged, and a tokenizer_config.json naming the special tokens.
#pragma once

#include <string>

#include "tokenizer/bpe_trainer.h"

namespace kipp {

std::string to_tokenizer_json(const TrainedTokenizer& tokenizer);
// tokenizer_class Qwen2Tokenizer, added_tokens_decoder, and bos/eos/pad/unk/mask_token for the
// default special tokens that are present (eos_token falls back to <|im_end|>).
std::string to_tokenizer_config_json(const TrainedTokenizer& tokenizer);

}  // namespace kipp
