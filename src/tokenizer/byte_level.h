// The GPT-2 byte-to-unicode map that byte-level BPE vocabularies are written in: every byte
// gets a printable character, so a token is a string even when it holds part of a UTF-8
// sequence. Bytes that are printable in Latin-1 (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF) stand for
// themselves; the other 68 take U+0100, U+0101, ... in byte order (space becomes U+0120 "Ġ").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kipp::byte_level {

// The code point that stands for `byte`.
uint32_t byte_to_code_point(uint8_t byte);
// The UTF-8 text of that code point (1 or 2 bytes).
std::string_view byte_to_text(uint8_t byte);
// Raw bytes -> byte-level text ("a b" -> "aĠb").
std::string encode(std::string_view bytes);
// Byte-level text -> raw bytes; nullopt when some character is not in the alphabet or the
// text is not valid UTF-8.
std::optional<std::string> decode(std::string_view text);

}  // namespace kipp::byte_level
