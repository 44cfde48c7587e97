#include "grammar/json_numbers.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

namespace kipp::grammar {

namespace {

constexpr int kIntegerDigits = 16;
constexpr int kFreeDigits = 16;
constexpr int kBoundedDigits = 15;

std::string strip_leading_zeros(std::string digits) {
  const size_t first = digits.find_first_not_of('0');
  return first == std::string::npos ? "0" : digits.substr(first);
}

std::string strip_trailing_zeros(std::string digits) {
  const size_t last = digits.find_last_not_of('0');
  return last == std::string::npos ? "" : digits.substr(0, last + 1);
}

bool is_zero(const Decimal& d) { return d.int_digits == "0" && d.frac_digits.empty(); }

// Compares magnitudes.
int compare_magnitude(const Decimal& a, const Decimal& b) {
  if (a.int_digits.size() != b.int_digits.size()) return a.int_digits.size() < b.int_digits.size() ? -1 : 1;
  if (const int c = a.int_digits.compare(b.int_digits); c != 0) return c < 0 ? -1 : 1;
  const size_t n = std::max(a.frac_digits.size(), b.frac_digits.size());
  std::string fa = a.frac_digits, fb = b.frac_digits;
  fa.resize(n, '0');
  fb.resize(n, '0');
  const int c = fa.compare(fb);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

int compare(const Decimal& a, const Decimal& b) {
  const bool na = a.negative && !is_zero(a), nb = b.negative && !is_zero(b);
  if (na != nb) return na ? -1 : 1;
  const int c = compare_magnitude(a, b);
  return na ? -c : c;
}

uint64_t pow10(int n) {
  uint64_t v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

// The magnitude's integer part, capped at `cap`.
uint64_t int_part(const Decimal& d, uint64_t cap) {
  if (d.int_digits.size() > 18) return cap;
  return std::min<uint64_t>(std::stoull(d.int_digits), cap);
}

// Digit-range alternatives: every same-length digit string from lo to hi, each followed by `suffix`.
void same_length(GrammarBuilder& b, uint32_t rule, GrammarBuilder::Sequence prefix, const std::string& lo,
                 const std::string& hi, const GrammarBuilder::Sequence& suffix) {
  auto digits = [&](char from, char to) {
    ByteSet set{};
    for (char c = from; c <= to; ++c) byte_set_add(set, static_cast<uint8_t>(c));
    return b.bytes(set);
  };
  auto finish = [&](GrammarBuilder::Sequence seq, size_t free_digits) {
    for (size_t i = 0; i < free_digits; ++i) seq.push_back(digits('0', '9'));
    seq.insert(seq.end(), suffix.begin(), suffix.end());
    b.add_alternative(rule, seq);
  };
  if (lo.empty()) return finish(prefix, 0);
  if (lo[0] == hi[0]) {
    prefix.push_back(b.byte(static_cast<uint8_t>(lo[0])));
    return same_length(b, rule, prefix, lo.substr(1), hi.substr(1), suffix);
  }
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  const bool lo_full = lo_rest.find_first_not_of('0') == std::string::npos;
  const bool hi_full = hi_rest.find_first_not_of('9') == std::string::npos;
  char mid_lo = lo[0], mid_hi = hi[0];
  if (!lo_full) {
    GrammarBuilder::Sequence p = prefix;
    p.push_back(b.byte(static_cast<uint8_t>(lo[0])));
    same_length(b, rule, p, lo_rest, std::string(lo_rest.size(), '9'), suffix);
    ++mid_lo;
  }
  if (!hi_full) {
    GrammarBuilder::Sequence p = prefix;
    p.push_back(b.byte(static_cast<uint8_t>(hi[0])));
    same_length(b, rule, p, std::string(hi_rest.size(), '0'), hi_rest, suffix);
    --mid_hi;
  }
  if (mid_lo <= mid_hi) {
    GrammarBuilder::Sequence p = prefix;
    p.push_back(digits(mid_lo, mid_hi));
    finish(p, lo_rest.size());
  }
}

// Every whole number from lo to hi (no leading zeros), each followed by suffix(digit count).
template <typename Suffix>
void whole_range(GrammarBuilder& b, uint32_t rule, const GrammarBuilder::Sequence& prefix, uint64_t lo, uint64_t hi,
                 Suffix suffix) {
  for (int n = 1; n <= 19 && lo <= hi; ++n) {
    const uint64_t first = n == 1 ? 0 : pow10(n - 1), last = pow10(n) - 1;
    if (hi < first || lo > last) continue;
    const uint64_t a = std::max(lo, first), z = std::min(hi, last);
    same_length(b, rule, prefix, std::to_string(a), std::to_string(z), suffix(n));
  }
}

// Fractions: digit strings s (at most `room` digits) with 0.s compared to 0.bound.
class Fractions {
 public:
  explicit Fractions(GrammarBuilder& b) : b_(b) {
    ByteSet set{};
    for (char c = '0'; c <= '9'; ++c) byte_set_add(set, static_cast<uint8_t>(c));
    digit_ = b_.sequence_rule("digit", {b_.bytes(set)});
  }

  // ".digits" with any digits, or nothing.
  uint32_t any(int room) {
    auto [it, added] = any_.try_emplace(room, 0);
    if (!added) return it->second;
    const uint32_t rule = b_.new_rule("fraction");
    b_.add_alternative(rule, {});
    if (room > 0) b_.add_alternative(rule, {b_.byte('.'), GrammarBuilder::repeat(digit_, 1, room)});
    return it->second = rule;
  }

  // ".digits" with 0.digits within [low, high] (either may be absent), or nothing when 0 is.
  uint32_t optional_dot(const std::string* low, bool low_exclusive, const std::string* high, bool high_exclusive,
                        int room) {
    const uint32_t rule = b_.new_rule("fraction");
    if (empty_ok(low, low_exclusive, high, high_exclusive)) b_.add_alternative(rule, {});
    if (room > 0)
      b_.add_alternative(
          rule, {b_.byte('.'), GrammarBuilder::ref(digits(low, low_exclusive, high, high_exclusive, room, false))});
    return rule;
  }

 private:
  static bool empty_ok(const std::string* low, bool low_exclusive, const std::string* high, bool high_exclusive) {
    const bool low_zero = !low || low->find_first_not_of('0') == std::string::npos;
    const bool high_zero = high && high->find_first_not_of('0') == std::string::npos;
    return (!low || (low_zero && !low_exclusive)) && (!high || !high_zero || !high_exclusive);
  }

  uint32_t digits(const std::string* low, bool low_exclusive, const std::string* high, bool high_exclusive, int room,
                  bool allow_empty) {
    const std::string key = (low ? "L" + *low + (low_exclusive ? "x" : "i") : "-") + "|" +
                            (high ? "H" + *high + (high_exclusive ? "x" : "i") : "-") + "|" + std::to_string(room) +
                            (allow_empty ? "e" : "n");
    auto [it, added] = memo_.try_emplace(key, 0);
    if (!added) return it->second;
    const uint32_t rule = b_.new_rule("fraction digits");
    it->second = rule;
    if (allow_empty && empty_ok(low, low_exclusive, high, high_exclusive)) b_.add_alternative(rule, {});
    if (room == 0) return rule;
    const char lo = low && !low->empty() ? (*low)[0] : '0';
    const char hi = high ? (high->empty() ? '0' : (*high)[0]) : '9';
    const std::string low_rest = low && !low->empty() ? low->substr(1) : "";
    const std::string high_rest = high && !high->empty() ? high->substr(1) : "";
    auto free_tail = [&](char from, char to) {
      if (from > to) return;
      ByteSet set{};
      for (char c = from; c <= to; ++c) byte_set_add(set, static_cast<uint8_t>(c));
      b_.add_alternative(rule, {b_.bytes(set), GrammarBuilder::repeat(digit_, 0, static_cast<uint32_t>(room - 1))});
    };
    auto fixed = [&](char c, const std::string* l, bool le, const std::string* h, bool he) {
      b_.add_alternative(rule,
                         {b_.byte(static_cast<uint8_t>(c)), GrammarBuilder::ref(digits(l, le, h, he, room - 1, true))});
    };
    if (low && high && lo == hi) {
      fixed(lo, &low_rest, low_exclusive, &high_rest, high_exclusive);
      return rule;
    }
    if (low) fixed(lo, &low_rest, low_exclusive, nullptr, false);
    if (high) fixed(hi, nullptr, false, &high_rest, high_exclusive);
    free_tail(low ? static_cast<char>(lo + 1) : '0', high ? static_cast<char>(hi - 1) : '9');
    return rule;
  }

  GrammarBuilder& b_;
  uint32_t digit_;
  std::map<int, uint32_t> any_;
  std::map<std::string, uint32_t> memo_;
};

struct Magnitude {
  uint64_t whole;
  std::string frac;
  bool exclusive;
};

// Non-negative decimals from low to high (low <= high), at most `digits` significant digits.
void nonnegative_decimals(GrammarBuilder& b, Fractions& fractions, uint32_t rule,
                          const GrammarBuilder::Sequence& prefix, const Magnitude& low, const Magnitude& high,
                          int digits) {
  auto room = [&](int n) { return digits - n; };
  auto whole_digits = [](uint64_t v) { return static_cast<int>(std::to_string(v).size()); };
  auto with_fraction = [&](uint64_t whole, uint32_t fraction) {
    GrammarBuilder::Sequence seq = prefix;
    b.append_literal(seq, std::to_string(whole));
    seq.push_back(GrammarBuilder::ref(fraction));
    b.add_alternative(rule, seq);
  };
  if (low.whole == high.whole) {
    with_fraction(low.whole, fractions.optional_dot(&low.frac, low.exclusive, &high.frac, high.exclusive,
                                                    room(whole_digits(low.whole))));
    return;
  }
  with_fraction(low.whole,
                fractions.optional_dot(&low.frac, low.exclusive, nullptr, false, room(whole_digits(low.whole))));
  if (low.whole + 1 <= high.whole - 1)
    whole_range(b, rule, prefix, low.whole + 1, high.whole - 1,
                [&](int n) { return GrammarBuilder::Sequence{GrammarBuilder::ref(fractions.any(room(n)))}; });
  with_fraction(high.whole,
                fractions.optional_dot(nullptr, false, &high.frac, high.exclusive, room(whole_digits(high.whole))));
}

}  // namespace

Decimal decimal_from_integer(int64_t value) {
  Decimal d;
  d.negative = value < 0;
  const uint64_t magnitude = value < 0 ? uint64_t{0} - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  d.int_digits = std::to_string(magnitude);
  return d;
}

Decimal decimal_from_double(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string text(buffer, result.ptr);
  Decimal d;
  if (!text.empty() && text[0] == '-') {
    d.negative = true;
    text.erase(0, 1);
  }
  const size_t e = text.find('e');
  const int exponent = std::stoi(text.substr(e + 1));
  std::string mantissa = text.substr(0, e);
  mantissa.erase(std::remove(mantissa.begin(), mantissa.end(), '.'), mantissa.end());
  // value = 0.mantissa * 10^(exponent + 1)
  const int point = exponent + 1;
  if (point <= 0) {
    d.int_digits = "0";
    d.frac_digits = strip_trailing_zeros(std::string(static_cast<size_t>(-point), '0') + mantissa);
  } else if (static_cast<size_t>(point) >= mantissa.size()) {
    d.int_digits = strip_leading_zeros(mantissa + std::string(point - mantissa.size(), '0'));
  } else {
    d.int_digits = strip_leading_zeros(mantissa.substr(0, point));
    d.frac_digits = strip_trailing_zeros(mantissa.substr(point));
  }
  return d;
}

Expected<uint32_t> integer_rule(GrammarBuilder& b, const std::optional<NumberBound>& low,
                                const std::optional<NumberBound>& high) {
  const int64_t limit = static_cast<int64_t>(pow10(kIntegerDigits) - 1);
  const uint64_t cap = pow10(kIntegerDigits);
  int64_t lo = -limit, hi = limit;
  if (low) {
    const Decimal& v = low->value;
    const int64_t whole = static_cast<int64_t>(int_part(v, cap));
    const bool integral = v.frac_digits.empty();
    int64_t c = v.negative && !is_zero(v) ? -whole : (integral ? whole : whole + 1);  // ceil
    if (low->exclusive && integral) ++c;
    lo = std::max(lo, c);
  }
  if (high) {
    const Decimal& v = high->value;
    const int64_t whole = static_cast<int64_t>(int_part(v, cap));
    const bool integral = v.frac_digits.empty();
    int64_t f = v.negative && !is_zero(v) ? -(integral ? whole : whole + 1) : whole;  // floor
    if (high->exclusive && integral) --f;
    hi = std::min(hi, f);
  }
  if (lo > hi)
    return make_error(low && high ? "minimum and maximum leave no integer"
                                  : (low ? "minimum is above the largest integer allowed (16 digits)"
                                         : "maximum is below the smallest integer allowed (16 digits)"));
  const uint32_t rule = b.new_rule("integer");
  auto none = [](int) { return GrammarBuilder::Sequence{}; };
  if (lo < 0) {
    const uint64_t from = hi < 0 ? static_cast<uint64_t>(-hi) : 1, to = static_cast<uint64_t>(-lo);
    GrammarBuilder::Sequence minus;
    b.append_literal(minus, "-");
    whole_range(b, rule, minus, from, to, none);
  }
  if (hi >= 0)
    whole_range(b, rule, {}, static_cast<uint64_t>(std::max<int64_t>(lo, 0)), static_cast<uint64_t>(hi), none);
  return rule;
}

Expected<uint32_t> number_rule(GrammarBuilder& b, const std::optional<NumberBound>& low,
                               const std::optional<NumberBound>& high) {
  const int digits = low || high ? kBoundedDigits : kFreeDigits;
  const uint64_t largest = pow10(digits) - 1;
  Decimal largest_decimal;
  largest_decimal.int_digits = std::to_string(largest);
  if (low && high) {
    const int c = compare(low->value, high->value);
    if (c > 0 || (c == 0 && (low->exclusive || high->exclusive)))
      return make_error("minimum and maximum leave no number");
  }
  if (low && !low->value.negative && compare_magnitude(low->value, largest_decimal) >= 0)
    return make_error("minimum is above the largest number allowed (" + std::to_string(digits) + " digits)");
  if (high && high->value.negative && compare_magnitude(high->value, largest_decimal) >= 0)
    return make_error("maximum is below the smallest number allowed (" + std::to_string(digits) + " digits)");
  auto magnitude = [&](const Decimal& d, bool exclusive) {
    if (compare_magnitude(d, largest_decimal) >= 0) return Magnitude{largest, "", false};
    return Magnitude{int_part(d, largest), d.frac_digits, exclusive};
  };
  const Magnitude top{largest, "", false};
  Fractions fractions(b);
  const uint32_t rule = b.new_rule("number");
  const bool low_negative = !low || (low->value.negative && !is_zero(low->value));
  const bool high_nonnegative = !high || !high->value.negative || is_zero(high->value);
  if (low_negative) {
    // -y with y from max(0, -high) (y > 0: no "-0") to -low.
    Magnitude from{0, "", true};
    if (high && !high_nonnegative) from = magnitude(high->value, high->exclusive);
    const Magnitude to = low ? magnitude(low->value, low->exclusive) : top;
    GrammarBuilder::Sequence minus;
    b.append_literal(minus, "-");
    nonnegative_decimals(b, fractions, rule, minus, from, to, digits);
  }
  if (high_nonnegative) {
    Magnitude from{0, "", false};
    if (low && !low_negative) from = magnitude(low->value, low->exclusive);
    const Magnitude to = high ? magnitude(high->value, high->exclusive) : top;
    nonnegative_decimals(b, fractions, rule, {}, from, to, digits);
  }
  return rule;
}

}  // namespace kipp::grammar
