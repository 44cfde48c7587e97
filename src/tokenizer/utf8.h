// UTF-8 helpers the tokenizer needs: strict validation (the encoder's input domain) and the
// "maximal subpart" replacement rule for turning arbitrary bytes into valid text, which is
// what Python's errors="replace" and Rust's from_utf8_lossy do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kipp::utf8 {

// The byte offset of the first byte that does not start a valid sequence (overlong forms,
// surrogates and values above U+10FFFF are invalid), or nullopt when all of `text` is valid.
std::optional<size_t> first_invalid_byte(std::string_view text);

// Length of the valid sequence at the start of `bytes`; 0 when it is invalid or incomplete.
// `*needs_more` is set when the bytes are a proper prefix of some valid sequence.
size_t valid_sequence_length(std::string_view bytes, bool* needs_more);

// Appends `bytes` to `out` with every maximal invalid subpart replaced by U+FFFD. A trailing
// incomplete sequence is left unconsumed when `keep_incomplete_tail` is set; returns the number
// of bytes consumed.
size_t append_lossy(std::string_view bytes, bool keep_incomplete_tail, std::string& out);

void append_code_point(uint32_t code_point, std::string& out);

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

}  // namespace kipp::utf8
