// The native Qwen2/Qwen3 tokenizer: byte-level BPE with the Qwen2 pre-tokenizer, loaded from
// the tokenizer data a Kipp GGUF embeds (TokenizerMetadata). Encodes exactly like Hugging
// Face's tokenizers (Rust) for Qwen2Tokenizer: added tokens matched in the raw text first,
// then NFC, the Qwen2 split regex, the GPT-2 byte-to-unicode map, and BPE by merge rank.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/tokenizer_metadata.h"

namespace kipp {

enum class SpecialTokens {
  Parse,      // added tokens in the text (<|im_start|>, <think>, ...) become their single ids
  PlainText,  // untrusted input: "<|im_start|>" is tokenized as ordinary text
};

class Tokenizer {
 public:
  // Validates the data (merges name known tokens, the vocabulary is byte-level) and builds
  // the lookup tables. Thread-safe after construction: encode/decode may run concurrently.
  static Expected<Tokenizer> create(const TokenizerMetadata& metadata);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Invalid UTF-8 in `text` is an error naming the byte offset (never a crash).
  Expected<std::vector<uint32_t>> encode(std::string_view text, SpecialTokens special = SpecialTokens::Parse) const;
  // The bytes of the tokens concatenated (not necessarily valid UTF-8 for a partial sequence).
  // Unknown ids are an error naming the id.
  Expected<std::string> decode(std::span<const uint32_t> ids) const;
  // The token's bytes (the byte-level piece mapped back to raw bytes; added tokens verbatim).
  Expected<std::string> token_to_bytes(uint32_t id) const;
  // The vocabulary string as stored (byte-level form, e.g. "Ġthe").
  Expected<std::string> token_to_piece(uint32_t id) const;

  uint32_t vocab_size() const;
  bool is_added_token(uint32_t id) const;    // control or user-defined
  bool is_special_token(uint32_t id) const;  // control (skip_special_tokens would drop it)

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of ids into text pieces for streaming output: never emits an incomplete
// UTF-8 sequence; holds the tail bytes until they complete. finish() flushes what is left
// (an incomplete tail is emitted as U+FFFD, as Hugging Face's decode with errors="replace").
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  // The text that became complete with this token (possibly empty).
  Expected<std::string> push(uint32_t id);
  std::string finish();

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace kipp
