// The Qwen2 pre-tokenizer split pattern as tokenizer.json states it. The native encoder
// implements exactly this one; the converter rejects a tokenizer.json with any other.
#pragma once

namespace kipp {

inline constexpr const char* kQwen2PretokenizerPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace kipp
