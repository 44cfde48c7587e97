// The Qwen2 pre-tokenizer: Hugging Face's Split(pattern, behavior Isolated) with the pattern
// of tokenizer.json, run with PCRE2 (JIT). Isolated means every match is a piece and so is
// every stretch of text between matches.
//
// The pattern is rewritten before PCRE2 compiles it so that it means what it means in Hugging
// Face's tokenizers (Oniguruma; Rust's regex crate agrees on these points):
// - `\s` there is Unicode White_Space. PCRE2's UCP `\s` adds U+180E (MONGOLIAN VOWEL
//   SEPARATOR, White_Space before Unicode 6.3, still in PCRE2's \h), so `\s` and `\S` become
//   an explicit White_Space class.
// - `(?i:'s|...)` folds with simple case folding in both engines, so "'ſ" (U+017F) is a
//   contraction; tests pin this.
// \p{L} and \p{N} follow each library's Unicode tables (Debian's PCRE2 10.42: Unicode 14),
// which may differ from the reference's for code points assigned since.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kipp {

// The Rust-style spelling of Unicode White_Space as a class body, for PCRE2.
extern const char* const kWhiteSpaceClass;

// Rewrites `\s` and `\S` (outside and inside classes) into explicit White_Space classes.
// Exposed for tests.
std::string rewrite_whitespace_classes(std::string_view pattern);

class Pretokenizer {
 public:
  // `pattern` as it appears in tokenizer.json.
  static Expected<Pretokenizer> create(std::string_view pattern);
  Pretokenizer(Pretokenizer&&) noexcept;
  Pretokenizer& operator=(Pretokenizer&&) noexcept;
  ~Pretokenizer();

  // Splits valid UTF-8 `text` into pieces (views into `text`), in order, calling
  // `sink(context, piece)` for each. Thread-safe.
  using PieceSink = void (*)(void* context, std::string_view piece);
  Status split(std::string_view text, PieceSink sink, void* context) const;
  // The same, collecting the pieces.
  Status split(std::string_view text, std::vector<std::string_view>& pieces) const;

 private:
  struct Impl;
  explicit Pretokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kipp
