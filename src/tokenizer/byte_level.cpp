#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace kipp::byte_level {
namespace {

bool stands_for_itself(uint32_t byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

struct Tables {
  std::array<uint32_t, 256> code_point{};
  std::array<std::string, 256> text;
  std::array<int16_t, 512> byte_of{};  // code point (< 0x200) -> byte, -1 when none

  Tables() {
    byte_of.fill(-1);
    uint32_t next = 0x100;
    for (uint32_t b = 0; b < 256; ++b) {
      code_point[b] = stands_for_itself(b) ? b : next++;
      utf8::append_code_point(code_point[b], text[b]);
      byte_of[code_point[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables instance;
  return instance;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t byte) { return tables().code_point[byte]; }

std::string_view byte_to_text(uint8_t byte) { return tables().text[byte]; }

std::string encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out.append(t.text[static_cast<uint8_t>(c)]);
  return out;
}

std::optional<std::string> decode(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    bool needs_more = false;
    const size_t length = utf8::valid_sequence_length(text.substr(i), &needs_more);
    // The alphabet lies below U+0200, so only 1- and 2-byte sequences can be in it.
    if (length == 0 || length > 2) return std::nullopt;
    uint32_t cp = static_cast<uint8_t>(text[i]);
    if (length == 2) cp = ((cp & 0x1F) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3F);
    if (cp >= t.byte_of.size() || t.byte_of[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(t.byte_of[cp]));
    i += length;
  }
  return out;
}

}  // namespace kipp::byte_level
