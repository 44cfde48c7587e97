#include "tokenizer/utf8.h"

namespace kipp::utf8 {

size_t valid_sequence_length(std::string_view bytes, bool* needs_more) {
  *needs_more = false;
  if (bytes.empty()) return 0;
  const auto b0 = static_cast<uint8_t>(bytes[0]);
  if (b0 < 0x80) return 1;
  size_t length = 0;
  // The allowed range of the second byte excludes overlong forms, surrogates and > U+10FFFF
  // (Unicode Table 3-7, "Well-Formed UTF-8 Byte Sequences").
  uint8_t low = 0x80, high = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) low = 0xA0;
    if (b0 == 0xED) high = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  for (size_t i = 1; i < length; ++i) {
    if (i >= bytes.size()) {
      *needs_more = true;
      return 0;
    }
    const auto b = static_cast<uint8_t>(bytes[i]);
    const uint8_t lo = i == 1 ? low : 0x80;
    const uint8_t hi = i == 1 ? high : 0xBF;
    if (b < lo || b > hi) return 0;
  }
  return length;
}

std::optional<size_t> first_invalid_byte(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    // ASCII runs are the common case; skip them eight bytes at a time.
    while (i + 8 <= text.size()) {
      uint64_t word = 0;
      for (size_t k = 0; k < 8; ++k) word |= static_cast<uint64_t>(static_cast<uint8_t>(text[i + k])) << (8 * k);
      if ((word & 0x8080808080808080ULL) != 0) break;
      i += 8;
    }
    if (i >= text.size()) break;
    bool needs_more = false;
    const size_t length = valid_sequence_length(text.substr(i), &needs_more);
    if (length == 0) return i;
    i += length;
  }
  return std::nullopt;
}

size_t append_lossy(std::string_view bytes, bool keep_incomplete_tail, std::string& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    bool needs_more = false;
    const size_t length = valid_sequence_length(bytes.substr(i), &needs_more);
    if (length > 0) {
      out.append(bytes.substr(i, length));
      i += length;
      continue;
    }
    if (needs_more) {
      // A valid but truncated sequence at the end: keep it for more bytes, or it is one
      // maximal subpart (a single U+FFFD).
      if (keep_incomplete_tail) return i;
      out.append(kReplacementCharacter);
      return bytes.size();
    }
    // The maximal subpart: the lead byte plus the continuation bytes that were still allowed.
    size_t subpart = 1;
    const auto b0 = static_cast<uint8_t>(bytes[i]);
    if (b0 >= 0xC2 && b0 <= 0xF4) {
      while (i + subpart < bytes.size()) {
        bool more = false;
        // A prefix is still valid if validating it alone asks for more bytes.
        valid_sequence_length(bytes.substr(i, subpart + 1), &more);
        if (!more) break;
        ++subpart;
      }
    }
    out.append(kReplacementCharacter);
    i += subpart;
  }
  return i;
}

void append_code_point(uint32_t code_point, std::string& out) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

}  // namespace kipp::utf8
