#include "grammar/string_patterns.h"

#include <algorithm>
#include <map>
#include <string>

#include "grammar/repeat_bounds.h"

namespace kipp::grammar {

namespace {

using B = GrammarBuilder;

constexpr int kMaxGroupDepth = 128;

CodePoints normalize(CodePoints set) {
  std::sort(set.begin(), set.end());
  CodePoints out;
  for (const auto& r : set) {
    if (!out.empty() && r.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  return out;
}

CodePoints complement(const CodePoints& set) {
  CodePoints out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : normalize(set)) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

const CodePoints kDigits = {{'0', '9'}};
const CodePoints kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodePoints kSpace = {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                           {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const CodePoints kNotLineEnd = complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}});

// The escape a JSON string needs for a code point, or empty when it is written raw.
std::string json_escape(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: break;
  }
  if (cp < 0x20) {
    const char* hex = "0123456789abcdef";
    return std::string("\\u00") + hex[cp >> 4] + hex[cp & 15];
  }
  return "";
}

class RegexCompiler {
 public:
  RegexCompiler(GrammarBuilder& b, std::string_view text) : b_(b), text_(text) {}

  Expected<uint32_t> compile() {
    bool anchored_start = false, anchored_end = false;
    std::string_view body = text_;
    if (!body.empty() && body.front() == '^') {
      anchored_start = true;
      body.remove_prefix(1);
    }
    if (!body.empty() && body.back() == '$' && !(body.size() >= 2 && body[body.size() - 2] == '\\')) {
      anchored_end = true;
      body.remove_suffix(1);
    }
    text_ = body;
    KIPP_ASSIGN_OR_RETURN(const uint32_t inner, alternation(0));
    if (pos_ != text_.size()) return error("unbalanced ')'");
    B::Sequence seq{b_.byte('"')};
    if (!anchored_start) seq.push_back(B::string_chars(0, kUnbounded));
    seq.push_back(B::ref(inner));
    if (!anchored_end) seq.push_back(B::string_chars(0, kUnbounded));
    seq.push_back(b_.byte('"'));
    return b_.sequence_rule("pattern", seq);
  }

 private:
  Error error(const std::string& what) const {
    return make_error(what + " at offset " + std::to_string(pos_) + " of the pattern");
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  Expected<uint32_t> alternation(int depth) {
    if (depth > kMaxGroupDepth) return error("groups nested too deeply");
    const uint32_t rule = b_.new_rule("pattern group");
    for (;;) {
      B::Sequence seq;
      while (!at_end() && peek() != '|' && peek() != ')') {
        KIPP_ASSIGN_OR_RETURN(B::Item item, quantified(depth));
        seq.push_back(item);
      }
      b_.add_alternative(rule, seq);
      if (at_end() || peek() != '|') return rule;
      ++pos_;
    }
  }

  Expected<B::Item> quantified(int depth) {
    KIPP_ASSIGN_OR_RETURN(const uint32_t atom_rule, atom(depth));
    uint32_t min = 1, max = 1;
    if (at_end()) return B::ref(atom_rule);
    const char c = peek();
    if (c == '?' || c == '*' || c == '+') {
      ++pos_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : kUnbounded;
    } else if (c == '{') {
      const size_t start = pos_++;
      RepeatBounds bounds;
      const auto nothing_between = [] {};  // ECMAScript allows no spaces inside the braces
      const RepeatBoundsError bad = read_repeat_bounds(text_, pos_, false, nothing_between, bounds);
      if (bad == RepeatBoundsError::kMissingMin) return error("a quantifier {m,n} needs a number");
      if (bad == RepeatBoundsError::kUnclosed) {
        pos_ = start;
        return error("an unterminated quantifier");
      }
      if (bad == RepeatBoundsError::kMaxBelowMin) return error("a quantifier {m,n} with n below m");
      min = bounds.min;
      max = bounds.max;
    } else {
      return B::ref(atom_rule);
    }
    if (!at_end() && peek() == '?') ++pos_;  // lazy: the same strings
    if (!at_end() && (peek() == '?' || peek() == '*' || peek() == '+' || peek() == '{'))
      return error("a quantifier cannot follow a quantifier");
    return B::repeat(atom_rule, min, max);
  }

  Expected<uint32_t> atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (text_.substr(pos_, 2) == "?:") {
        pos_ += 2;
      } else if (text_.substr(pos_, 2) == "?<" && text_.substr(pos_, 3) != "?<=" && text_.substr(pos_, 3) != "?<!") {
        const size_t close = text_.find('>', pos_);
        if (close == std::string_view::npos) return error("an unterminated group name");
        pos_ = close + 1;
      } else if (!at_end() && peek() == '?') {
        return error("lookaround and other (? groups are not supported");
      }
      KIPP_ASSIGN_OR_RETURN(const uint32_t inner, alternation(depth + 1));
      if (at_end() || peek() != ')') return error("a missing ')'");
      ++pos_;
      return inner;
    }
    if (c == ')' || c == '|') return error("an empty group");
    if (c == '*' || c == '+' || c == '?' || c == '{' || c == '}')
      return error("a quantifier without anything to repeat");
    if (c == '^' || c == '$') return error("anchors are supported only at the start (^) and the end ($)");
    if (c == '.') {
      ++pos_;
      return chars(kNotLineEnd);
    }
    if (c == '[') return char_class();
    if (c == '\\') {
      KIPP_ASSIGN_OR_RETURN(const CodePoints set, escape(false));
      return chars(set);
    }
    KIPP_ASSIGN_OR_RETURN(const uint32_t cp, literal_char());
    return chars({{cp, cp}});
  }

  Expected<uint32_t> literal_char() {
    const uint8_t lead = static_cast<uint8_t>(text_[pos_]);
    const int n = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    if (n == 0 || pos_ + n > text_.size()) return error("invalid UTF-8");
    uint32_t cp = n == 1 ? lead : lead & (0x7F >> n);
    for (int i = 1; i < n; ++i) cp = cp << 6 | (static_cast<uint8_t>(text_[pos_ + i]) & 0x3F);
    pos_ += n;
    return cp;
  }

  Expected<uint32_t> hex(size_t digits) {
    if (pos_ + digits > text_.size()) return error("a short hex escape");
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      const char h = text_[pos_++];
      if (!std::isxdigit(static_cast<unsigned char>(h))) return error("a bad hex digit");
      v = v * 16 +
          static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
    }
    return v;
  }

  // After a backslash: the code points the escape stands for.
  Expected<CodePoints> escape(bool in_class) {
    ++pos_;
    if (at_end()) return error("a pattern ending in a backslash");
    const char c = text_[pos_++];
    switch (c) {
      case 'd': return kDigits;
      case 'D': return complement(kDigits);
      case 'w': return kWord;
      case 'W': return complement(kWord);
      case 's': return kSpace;
      case 'S': return complement(kSpace);
      case 'n': return CodePoints{{'\n', '\n'}};
      case 'r': return CodePoints{{'\r', '\r'}};
      case 't': return CodePoints{{'\t', '\t'}};
      case 'f': return CodePoints{{'\f', '\f'}};
      case 'v': return CodePoints{{'\v', '\v'}};
      case '0': return CodePoints{{0, 0}};
      case 'x': {
        KIPP_ASSIGN_OR_RETURN(const uint32_t v, hex(2));
        return CodePoints{{v, v}};
      }
      case 'u': {
        if (!at_end() && peek() == '{') {
          const size_t close = text_.find('}', pos_);
          if (close == std::string_view::npos || close == pos_ + 1 || close - pos_ - 1 > 6)
            return error("a bad \\u{...}");
          ++pos_;
          KIPP_ASSIGN_OR_RETURN(const uint32_t v, hex(close - pos_));
          ++pos_;
          if (v > 0x10FFFF) return error("a code point above U+10FFFF");
          return CodePoints{{v, v}};
        }
        KIPP_ASSIGN_OR_RETURN(const uint32_t v, hex(4));
        return CodePoints{{v, v}};
      }
      case 'b':
        if (in_class) return CodePoints{{'\b', '\b'}};
        return error("word boundaries (\\b) are not supported");
      default: break;
    }
    if (c >= '1' && c <= '9') return error("backreferences are not supported");
    if (std::string_view("^$\\.*+?()[]{}|/-").find(c) != std::string_view::npos) {
      const uint32_t cp = static_cast<uint8_t>(c);
      return CodePoints{{cp, cp}};
    }
    --pos_;
    return error(std::string("the escape \\") + c + " is not supported");
  }

  Expected<uint32_t> char_class() {
    ++pos_;
    bool negated = false;
    if (!at_end() && peek() == '^') {
      negated = true;
      ++pos_;
    }
    CodePoints set;
    while (!at_end() && peek() != ']') {
      CodePoints item;
      bool single = false;
      uint32_t lo = 0;
      if (peek() == '\\') {
        KIPP_ASSIGN_OR_RETURN(item, escape(true));
        single = item.size() == 1 && item[0].first == item[0].second;
        lo = item.empty() ? 0 : item[0].first;
      } else {
        KIPP_ASSIGN_OR_RETURN(lo, literal_char());
        item = {{lo, lo}};
        single = true;
      }
      if (single && pos_ + 1 < text_.size() && peek() == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        uint32_t hi = 0;
        if (peek() == '\\') {
          KIPP_ASSIGN_OR_RETURN(const CodePoints end, escape(true));
          if (end.size() != 1 || end[0].first != end[0].second) return error("a class range ending in a class");
          hi = end[0].first;
        } else {
          KIPP_ASSIGN_OR_RETURN(hi, literal_char());
        }
        if (hi < lo) return error("a class range out of order");
        item = {{lo, hi}};
      }
      set.insert(set.end(), item.begin(), item.end());
    }
    if (at_end()) return error("an unterminated class");
    ++pos_;
    return chars(negated ? complement(set) : normalize(set));
  }

  // A rule for one character of the set as a JSON string writes it.
  uint32_t chars(const CodePoints& set) {
    const CodePoints normal = normalize(set);
    auto [it, added] = sets_.try_emplace(normal, 0);
    if (!added) return it->second;
    const uint32_t rule = b_.new_rule("pattern character");
    it->second = rule;
    CodePoints raw;
    for (const auto& [lo, hi] : normal) {
      for (uint32_t cp = lo; cp <= std::min<uint32_t>(hi, 0x5C); ++cp) {
        const std::string escaped = json_escape(cp);
        if (escaped.empty()) {
          raw.push_back({cp, cp});
        } else {
          B::Sequence seq;
          b_.append_literal(seq, escaped);
          b_.add_alternative(rule, seq);
        }
      }
      if (hi > 0x5C) raw.push_back({std::max<uint32_t>(lo, 0x5D), hi});
    }
    add_utf8_alternatives(b_, rule, normalize(raw));
    return rule;
  }

  GrammarBuilder& b_;
  std::string_view text_;
  size_t pos_ = 0;
  std::map<CodePoints, uint32_t> sets_;
};

const std::map<std::string, std::string, std::less<>>& format_patterns() {
  static const std::string date =
      "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"
      "02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-"
      "29)";
  static const std::string time =
      "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
  static const std::string atom = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
  static const std::string label = "[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?";
  static const std::map<std::string, std::string, std::less<>> patterns = {
      {"date", "^" + date + "$"},
      {"time", "^" + time + "$"},
      {"date-time", "^" + date + "T" + time + "$"},
      {"uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
      {"email", "^" + atom + "(?:\\." + atom + ")*@(?:" + label + "\\.)+" + label + "$"},
  };
  return patterns;
}

}  // namespace

Expected<uint32_t> pattern_rule(GrammarBuilder& builder, std::string_view pattern) {
  return RegexCompiler(builder, pattern).compile();
}

Expected<uint32_t> format_rule(GrammarBuilder& builder, std::string_view format) {
  const auto& patterns = format_patterns();
  const auto it = patterns.find(format);
  if (it == patterns.end())
    return make_error("the format '" + std::string(format) + "' is not supported (date, time, date-time, uuid, email)");
  return pattern_rule(builder, it->second);
}

}  // namespace kipp::grammar
