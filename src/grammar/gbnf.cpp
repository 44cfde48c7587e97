// llama.cpp's GBNF, from its documentation: rules `name ::= alternatives`, alternatives `|`,
// sequences of "literals", [classes] ([^...] negated, a-z ranges), rule names, (groups) and `.`
// (any character), each optionally followed by * + ? {m} {m,} {m,n} {,n}; comments from `#` to
// the end of the line. A rule ends at a newline unless inside parentheses or before a line
// starting with `|`. Literals and classes are code points, matched as UTF-8; escapes \n \r \t
// \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH. The start rule is `root`.
#include <algorithm>
#include <map>
#include <string>

#include "grammar/grammar.h"
#include "grammar/grammar_ir.h"
#include "grammar/repeat_bounds.h"
#include "grammar/string_patterns.h"

namespace kipp::grammar {

namespace {

using B = GrammarBuilder;

constexpr int kMaxNesting = 128;

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  Expected<GrammarPtr> parse() {
    for (;;) {
      skip(true);
      if (at_end()) break;
      KIPP_RETURN_IF_ERROR(rule());
    }
    for (const auto& [name, info] : rules_)
      if (!info.defined) return error_at(info.first_use, "undefined rule '" + name + "'");
    const auto root = rules_.find("root");
    if (root == rules_.end()) return make_error("GBNF: the grammar has no rule 'root'");
    auto grammar = b_.finish(root->second.id);
    if (!grammar.ok()) return make_error("GBNF: " + grammar.message());
    return grammar;
  }

 private:
  struct RuleInfo {
    uint32_t id;
    bool defined = false;
    size_t first_use = 0;
  };

  Error error_at(size_t offset, const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return make_error("GBNF line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what);
  }
  Error error(const std::string& what) const { return error_at(pos_, what); }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void skip(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  RuleInfo& info(const std::string& name, size_t offset) {
    auto [it, added] = rules_.try_emplace(name, RuleInfo{0, false, offset});
    if (added) it->second.id = b_.new_rule(name);
    return it->second;
  }

  std::string name() {
    const size_t start = pos_;
    while (!at_end() && name_char(peek())) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  Status rule() {
    const size_t start = pos_;
    const std::string rule_name = name();
    if (rule_name.empty()) return error("expected a rule name");
    skip(false);
    if (text_.substr(pos_, 3) != "::=") return error("expected '::=' after '" + rule_name + "'");
    pos_ += 3;
    RuleInfo& r = info(rule_name, start);
    if (r.defined) return error_at(start, "rule '" + rule_name + "' is defined twice");
    r.defined = true;
    const uint32_t id = r.id;
    skip(true);
    KIPP_RETURN_IF_ERROR(alternatives(id, 0));
    skip(false);
    if (!at_end() && peek() != '\n' && peek() != '\r')
      return error("unexpected character '" + std::string(1, peek()) + "'");
    return ok_status();
  }

  Status alternatives(uint32_t rule, int depth) {
    if (depth > kMaxNesting) return error("groups nested too deeply");
    const bool nested = depth > 0;
    for (;;) {
      B::Sequence seq;
      for (;;) {
        skip(nested);
        if (at_end()) break;
        const char c = peek();
        if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
        KIPP_ASSIGN_OR_RETURN(const B::Item item, element(depth));
        seq.push_back(item);
        if (b_.size() > kMaxGrammarElements) return error("the grammar is too large");
      }
      b_.add_alternative(rule, seq);
      // A top-level rule goes on when a following line starts with '|'.
      const size_t before = pos_;
      skip(true);
      if (!at_end() && peek() == '|') {
        ++pos_;
        skip(true);
        continue;
      }
      if (!nested) pos_ = before;
      return ok_status();
    }
  }

  Expected<B::Item> element(int depth) {
    uint32_t rule = 0;
    const size_t start = pos_;
    const char c = peek();
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (!at_end() && peek() != '"') {
        if (peek() == '\n') return error("a literal cannot span lines");
        KIPP_ASSIGN_OR_RETURN(const uint32_t cp, character());
        append_utf8(bytes, cp);
      }
      if (at_end()) return error_at(start, "unterminated literal");
      ++pos_;
      rule = b_.literal_rule("literal", bytes);
    } else if (c == '[') {
      KIPP_ASSIGN_OR_RETURN(rule, char_class());
    } else if (c == '.') {
      ++pos_;
      rule = b_.new_rule("any character");
      add_utf8_alternatives(b_, rule, {{0, 0x10FFFF}});
    } else if (c == '(') {
      ++pos_;
      rule = b_.new_rule("group");
      KIPP_RETURN_IF_ERROR(alternatives(rule, depth + 1));
      skip(true);
      if (at_end() || peek() != ')') return error_at(start, "unclosed '('");
      ++pos_;
    } else if (name_char(c)) {
      const std::string referenced = name();
      rule = info(referenced, start).id;
    } else {
      return error("unexpected character '" + std::string(1, c) + "'");
    }
    if (at_end()) return B::ref(rule);
    const char q = peek();
    if (q == '*' || q == '+' || q == '?') {
      ++pos_;
      return B::repeat(rule, q == '+' ? 1 : 0, q == '?' ? 1 : kUnbounded);
    }
    if (q != '{') return B::ref(rule);
    ++pos_;
    RepeatBounds bounds;
    const auto spaces_and_comments = [this] { skip(false); };
    const RepeatBoundsError bad = read_repeat_bounds(text_, pos_, true, spaces_and_comments, bounds);
    if (bad == RepeatBoundsError::kMissingMin) return error("expected a number in '{}'");
    if (bad == RepeatBoundsError::kUnclosed) return error("expected '}'");
    if (bad == RepeatBoundsError::kMaxBelowMin) return error("a repetition {m,n} with n below m");
    return B::repeat(rule, bounds.min, bounds.max);
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // One character of a literal or class: a UTF-8 character or an escape.
  Expected<uint32_t> character() {
    const size_t start = pos_;
    if (peek() == '\\') {
      ++pos_;
      if (at_end()) return error_at(start, "unterminated escape");
      const char e = text_[pos_++];
      size_t digits = 0;
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 'r': return uint32_t{'\r'};
        case 't': return uint32_t{'\t'};
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-': return static_cast<uint32_t>(e);
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default: return error_at(start, std::string("unknown escape '\\") + e + "'");
      }
      uint32_t v = 0;
      for (size_t i = 0; i < digits; ++i) {
        if (at_end() || !std::isxdigit(static_cast<unsigned char>(peek()))) return error("expected a hex digit");
        const char h = text_[pos_++];
        v = v * 16 +
            static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
      }
      if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return error_at(start, "the escape is not a Unicode scalar value");
      return v;
    }
    const uint8_t lead = static_cast<uint8_t>(peek());
    const int n = lead < 0x80 ? 1 : lead >= 0xF8 ? 0 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    if (n == 0 || pos_ + n > text_.size()) return error("invalid UTF-8");
    uint32_t cp = n == 1 ? lead : lead & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const uint8_t b = static_cast<uint8_t>(text_[pos_ + i]);
      if ((b & 0xC0) != 0x80) return error("invalid UTF-8");
      cp = cp << 6 | (b & 0x3F);
    }
    pos_ += n;
    return cp;
  }

  Expected<uint32_t> char_class() {
    const size_t start = pos_++;
    bool negated = false;
    if (!at_end() && peek() == '^') {
      negated = true;
      ++pos_;
    }
    CodePoints set;
    while (!at_end() && peek() != ']') {
      if (peek() == '\n') return error_at(start, "unterminated character class");
      KIPP_ASSIGN_OR_RETURN(const uint32_t lo, character());
      uint32_t hi = lo;
      if (pos_ + 1 < text_.size() && peek() == '-' && text_[pos_ + 1] != ']' && text_[pos_ + 1] != '\n') {
        ++pos_;
        KIPP_ASSIGN_OR_RETURN(hi, character());
        if (hi < lo) return error_at(start, "a class range out of order");
      }
      set.push_back({lo, hi});
    }
    if (at_end()) return error_at(start, "unterminated character class");
    ++pos_;
    std::sort(set.begin(), set.end());
    if (negated) {
      CodePoints complement;
      uint32_t next = 0;
      for (const auto& [lo, hi] : set) {
        if (lo > next) complement.push_back({next, lo - 1});
        next = std::max(next, hi + 1);
      }
      if (next <= 0x10FFFF) complement.push_back({next, 0x10FFFF});
      set = complement;
    }
    const uint32_t rule = b_.new_rule("class");
    add_utf8_alternatives(b_, rule, set);
    return rule;
  }

  std::string_view text_;
  size_t pos_ = 0;
  GrammarBuilder b_;
  std::map<std::string, RuleInfo> rules_;
};

}  // namespace

Expected<GrammarPtr> compile_gbnf(std::string_view gbnf_text) { return GbnfParser(gbnf_text).parse(); }

}  // namespace kipp::grammar
