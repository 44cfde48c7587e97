#include "tokenizer/normalizer.h"

#include <utf8proc.h>
#include <cstdlib>

namespace kipp {

bool is_nfc_inert(uint32_t cp) {
  return cp < 0x300 || (cp >= 0x3041 && cp <= 0x3096) || (cp >= 0x30A1 && cp <= 0x30FA) ||
         (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3);
}

namespace {

// Decodes the code point at `p` (valid UTF-8) and its length.
inline uint32_t decode_at(const uint8_t* p, size_t* length) {
  const uint8_t b = p[0];
  if (b < 0x80) {
    *length = 1;
    return b;
  }
  if (b < 0xE0) {
    *length = 2;
    return ((b & 0x1Fu) << 6) | (p[1] & 0x3Fu);
  }
  if (b < 0xF0) {
    *length = 3;
    return ((b & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
  }
  *length = 4;
  return ((b & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
}

void append_utf8proc_nfc(std::string_view text, std::string& out) {
  utf8proc_uint8_t* result = nullptr;
  // No UTF8PROC_NULLTERM: the length is explicit, so U+0000 inside the text is kept.
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &result, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (length < 0) {
    // Only reachable on allocation failure (the input was validated): keep the text as is
    // rather than lose it.
    out.append(text);
  } else {
    out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(length));
  }
  std::free(result);
}

}  // namespace

std::string_view nfc(std::string_view text, std::string& storage) {
  // An inert character is a safe boundary: NFC(a + b) == NFC(a) + NFC(b) when b starts with
  // one (UAX #15, "stable code points"). So only the stretches around non-inert characters,
  // from the inert character before them (it may compose with a following mark) up to the
  // next inert character, go through utf8proc; the rest is copied. Text that is all inert
  // (most of it) is returned as is.
  const auto* data = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t copied = 0;                           // text[0, copied) is already in `storage`
  size_t last_inert = std::string_view::npos;  // start of the latest inert character
  bool changed = false;
  size_t i = 0;
  while (i < n) {
    if (data[i] < 0x80) {
      last_inert = i++;
      continue;
    }
    size_t length = 0;
    const uint32_t cp = decode_at(data + i, &length);
    if (is_nfc_inert(cp)) {
      last_inert = i;
      i += length;
      continue;
    }
    if (!changed) {
      storage.clear();
      storage.reserve(n + n / 8);
      changed = true;
    }
    const size_t region_start = last_inert != std::string_view::npos && last_inert >= copied ? last_inert : copied;
    size_t region_end = i + length;
    while (region_end < n) {
      size_t next_length = 0;
      if (is_nfc_inert(decode_at(data + region_end, &next_length))) break;
      region_end += next_length;
    }
    storage.append(text.substr(copied, region_start - copied));
    append_utf8proc_nfc(text.substr(region_start, region_end - region_start), storage);
    copied = region_end;
    i = region_end;
    last_inert = std::string_view::npos;
  }
  if (!changed) return text;
  storage.append(text.substr(copied));
  return storage;
}

}  // namespace kipp
