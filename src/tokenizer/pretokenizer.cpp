#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

namespace kipp {

const char* const kWhiteSpaceClass =
    R"(\x{9}-\x{D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string rewrite_whitespace_classes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() * 2);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? std::string(kWhiteSpaceClass) : "[" + std::string(kWhiteSpaceClass) + "]";
      } else if (next == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceClass) + "]";
      } else {
        // `\S` inside a class has no inline spelling; the Qwen2 pattern has none, and
        // Pretokenizer::create rejects a pattern that still contains one.
        out += c;
        out += next;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

namespace {

struct CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

// One match-data block per thread, reused across calls: only the whole-match offsets are
// read, so one ovector pair fits every pattern.
pcre2_match_data* thread_match_data() {
  thread_local std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(pcre2_match_data_create(1, nullptr));
  return data.get();
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

struct Pretokenizer::Impl {
  std::unique_ptr<pcre2_code, CodeDeleter> code;
  bool jit = false;
};

Pretokenizer::Pretokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer& Pretokenizer::operator=(Pretokenizer&&) noexcept = default;
Pretokenizer::~Pretokenizer() = default;

Expected<Pretokenizer> Pretokenizer::create(std::string_view pattern) {
  const std::string rewritten = rewrite_whitespace_classes(pattern);
  if (rewritten.find("\\S") != std::string::npos) {
    return make_error(
        "pre-tokenizer pattern has \\S inside a character class, which Kipp cannot map to "
        "Unicode White_Space: " +
        std::string(pattern));
  }
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  auto impl = std::make_unique<Impl>();
  impl->code.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                 PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr));
  if (!impl->code) {
    return make_error("pre-tokenizer pattern does not compile at offset " + std::to_string(error_offset) + ": " +
                      pcre2_message(error));
  }
  // Without JIT (an unsupported platform) the interpreter gives the same matches, slower.
  impl->jit = pcre2_jit_compile(impl->code.get(), PCRE2_JIT_COMPLETE) == 0;
  return Pretokenizer(std::move(impl));
}

Status Pretokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  return split(
      text,
      [](void* context, std::string_view piece) {
        static_cast<std::vector<std::string_view>*>(context)->push_back(piece);
      },
      &pieces);
}

Status Pretokenizer::split(std::string_view text, PieceSink sink, void* context) const {
  pcre2_match_data* data = thread_match_data();
  if (data == nullptr) return make_error("pre-tokenizer: out of memory for PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t last_end = 0;
  size_t offset = 0;
  while (offset < text.size()) {
    int rc = 0;
    if (impl_->jit) {
      rc = pcre2_jit_match(impl_->code.get(), subject, text.size(), offset, 0, data, nullptr);
    }
    if (!impl_->jit || rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // The input was validated once by the caller; checking it again on every call from a
      // new offset would make splitting quadratic.
      rc = pcre2_match(impl_->code.get(), subject, text.size(), offset, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, data,
                       nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      return make_error("pre-tokenizer: PCRE2 match failed at byte " + std::to_string(offset) + ": " +
                        pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t start = ovector[0];
    const size_t end = ovector[1];
    if (end == start) {
      // An empty match contributes no piece; step over one character (the text between
      // matches becomes a gap piece).
      offset = end + 1;
      while (offset < text.size() && (static_cast<uint8_t>(text[offset]) & 0xC0) == 0x80) ++offset;
      continue;
    }
    if (start > last_end) sink(context, text.substr(last_end, start - last_end));
    sink(context, text.substr(start, end - start));
    last_end = end;
    offset = end;
  }
  if (last_end < text.size()) sink(context, text.substr(last_end));
  return ok_status();
}

}  // namespace kipp
