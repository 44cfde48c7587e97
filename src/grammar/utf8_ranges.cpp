// Code point ranges to UTF-8 byte-range sequences: a range is split at the encoding lengths and
// then wherever the continuation bytes of its ends do not cover their full span, so that each
// piece is a product of byte ranges.
#include <algorithm>

#include "grammar/string_patterns.h"

namespace kipp::grammar {

namespace {

int encoded_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, uint8_t* out) {
  switch (encoded_length(cp)) {
    case 1: out[0] = static_cast<uint8_t>(cp); break;
    case 2:
      out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    case 3:
      out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    default:
      out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  }
}

void split(GrammarBuilder& b, uint32_t rule, uint32_t lo, uint32_t hi) {
  for (const uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= boundary && hi > boundary) {
      split(b, rule, lo, boundary);
      split(b, rule, boundary + 1, hi);
      return;
    }
  }
  const int n = encoded_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(b, rule, lo, lo | m);
        split(b, rule, (lo | m) + 1, hi);
        return;
      }
      if ((hi & m) != m) {
        split(b, rule, lo, (hi & ~m) - 1);
        split(b, rule, hi & ~m, hi);
        return;
      }
    }
  }
  uint8_t a[4], z[4];
  encode(lo, a);
  encode(hi, z);
  GrammarBuilder::Sequence seq;
  for (int i = 0; i < n; ++i) {
    ByteSet set{};
    for (int v = a[i]; v <= z[i]; ++v) byte_set_add(set, static_cast<uint8_t>(v));
    seq.push_back(b.bytes(set));
  }
  b.add_alternative(rule, seq);
}

}  // namespace

void add_utf8_alternatives(GrammarBuilder& builder, uint32_t rule, const CodePoints& set) {
  for (auto [lo, hi] : set) {
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    if (lo > hi) continue;
    if (lo < 0xD800 && hi >= 0xD800) {
      split(builder, rule, lo, 0xD7FF);
      lo = 0xE000;
    }
    if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
    if (lo <= hi) split(builder, rule, lo, hi);
  }
}

}  // namespace kipp::grammar
