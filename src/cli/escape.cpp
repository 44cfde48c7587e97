#include "cli/escape.h"

#include <cstdio>
#include <string_view>

#include "tokenizer/utf8.h"

namespace kipp::cli {
namespace {

void append_escaped(unsigned char c, std::string& out) {
  switch (c) {
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\\': out += "\\\\"; break;
    case '"': out += "\\\""; break;
    default:
      if (c >= 0x20 && c < 0x7f) {
        out += static_cast<char>(c);
      } else {
        char buffer[8];
        std::snprintf(buffer, sizeof buffer, "\\x%02X", c);
        out += buffer;
      }
  }
}

}  // namespace

std::string escape_bytes(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) append_escaped(c, out);
  return out;
}

std::string escape_text(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    bool needs_more = false;
    const size_t length = utf8::valid_sequence_length(std::string_view(bytes).substr(i), &needs_more);
    if (length > 1) {
      out.append(bytes, i, length);
      i += length;
    } else {
      append_escaped(static_cast<unsigned char>(bytes[i]), out);
      ++i;
    }
  }
  return out;
}

}  // namespace kipp::cli
