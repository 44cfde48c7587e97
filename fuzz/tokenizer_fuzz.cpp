// libFuzzer target for the tokenizer (build and run with `scripts/fuzz.sh SECONDS tokenizer`).
//
// The input is text for both tokenizers (the small hand-made one, and the real Qwen3 one when
// KIPP_TOKENIZER_DIR names a folder with its tokenizer.json) in both special-token modes:
// - invalid UTF-8 is an error naming the first bad byte, nothing else;
// - valid UTF-8 encodes, every id is in the vocabulary, decode(encode(s)) == NFC(s) in
//   PlainText mode and is NFC-equivalent to s in Parse mode (added tokens split the text
//   before normalization);
// - the incremental decoder's pieces are valid UTF-8 and concatenate to decode(ids).
// The same bytes read as little-endian 16-bit ids (any ids, even ones no text encodes to)
// must stream to valid UTF-8 that equals decode() whenever decode() is valid UTF-8.
#include <utf8proc.h>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "unit/helpers/tokenizer_fixtures.h"

namespace {

void check(bool condition) {
  if (!condition) __builtin_trap();
}

std::string reference_nfc(const std::string& text) {
  utf8proc_uint8_t* result = nullptr;
  const auto n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &result, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  check(n >= 0);
  std::string out(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
  std::free(result);
  return out;
}

std::vector<kipp::Tokenizer>& tokenizers() {
  static std::vector<kipp::Tokenizer> list = [] {
    std::vector<kipp::Tokenizer> out;
    auto small = kipp::Tokenizer::create(kipp::testing::small_tokenizer_metadata());
    check(small.ok());
    out.push_back(std::move(small).value());
    if (const char* dir = std::getenv("KIPP_TOKENIZER_DIR"); dir != nullptr && *dir != '\0') {
      auto metadata = kipp::testing::qwen_tokenizer_metadata("");
      check(metadata.ok());
      auto qwen = kipp::Tokenizer::create(*metadata);
      check(qwen.ok());
      out.push_back(std::move(qwen).value());
    }
    return out;
  }();
  return list;
}

std::string stream(const kipp::Tokenizer& tokenizer, const std::vector<uint32_t>& ids) {
  kipp::IncrementalDecoder decoder(tokenizer);
  std::string out;
  for (const uint32_t id : ids) {
    auto piece = decoder.push(id);
    check(piece.ok());
    check(!kipp::utf8::first_invalid_byte(*piece).has_value());
    out += *piece;
  }
  const std::string tail = decoder.finish();
  check(!kipp::utf8::first_invalid_byte(tail).has_value());
  return out + tail;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto bad = kipp::utf8::first_invalid_byte(text);
  const std::string nfc = bad ? std::string() : reference_nfc(text);
  for (const kipp::Tokenizer& tokenizer : tokenizers()) {
    for (const auto mode : {kipp::SpecialTokens::Parse, kipp::SpecialTokens::PlainText}) {
      auto ids = tokenizer.encode(text, mode);
      if (bad) {
        check(!ids.ok());
        check(ids.message().find("byte offset " + std::to_string(*bad) + " ") != std::string::npos);
        continue;
      }
      check(ids.ok());
      for (const uint32_t id : *ids) check(id < tokenizer.vocab_size());
      auto decoded = tokenizer.decode(*ids);
      check(decoded.ok());
      if (mode == kipp::SpecialTokens::PlainText) {
        check(*decoded == nfc);
      } else {
        check(reference_nfc(*decoded) == nfc);
      }
      check(stream(tokenizer, *ids) == *decoded);
    }
    // Arbitrary ids: decoding never fails for ids in range and streams to valid UTF-8.
    std::vector<uint32_t> ids;
    for (size_t i = 0; i + 1 < size; i += 2) {
      ids.push_back((static_cast<uint32_t>(data[i]) | (static_cast<uint32_t>(data[i + 1]) << 8)) %
                    tokenizer.vocab_size());
    }
    auto decoded = tokenizer.decode(ids);
    check(decoded.ok());
    const std::string streamed = stream(tokenizer, ids);
    if (!kipp::utf8::first_invalid_byte(*decoded)) check(streamed == *decoded);
  }
  return 0;
}
