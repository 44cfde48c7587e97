// NFC normalization (the Qwen2 tokenizer's normalizer), with utf8proc doing the work. Most
// text is made of characters that can neither change nor combine with a neighbour; those are
// copied (or the text returned as is) without the utf8proc round trip, which costs far more.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kipp {

// True for code points that NFC leaves alone in any context: canonical combining class 0,
// no decomposition, and never the second character of a composition. Covers ASCII, Latin-1,
// Latin Extended-A/B, IPA, spacing modifiers (< U+0300), kana, CJK unified ideographs and
// precomposed Hangul. A unit test checks the claim against utf8proc's tables.
bool is_nfc_inert(uint32_t code_point);

// `text` must be valid UTF-8. Returns a view of `text` when it is all inert; otherwise
// normalizes into `storage` (utf8proc only on the stretches around non-inert characters) and
// returns a view of that.
std::string_view nfc(std::string_view text, std::string& storage);

}  // namespace kipp
