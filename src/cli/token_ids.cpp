#include "cli/token_ids.h"

namespace kipp::cli {

Expected<std::vector<uint32_t>> parse_token_ids(const std::string& text) {
  std::vector<uint32_t> ids;
  size_t i = 0;
  auto separator = [](char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  std::string body = text;
  if (!body.empty() && body.front() == '[' && body.back() == ']') body = body.substr(1, body.size() - 2);
  while (i < body.size()) {
    if (separator(body[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < body.size() && !separator(body[end])) ++end;
    const std::string item = body.substr(i, end - i);
    uint64_t value = 0;
    bool valid = item.size() <= 10;
    for (char c : item) {
      if (c < '0' || c > '9') valid = false;
      if (valid) value = value * 10 + static_cast<uint64_t>(c - '0');
    }
    if (!valid || value > UINT32_MAX)
      return make_error("--ids: '" + item + "' is not a token id (a number 0..4294967295)");
    ids.push_back(static_cast<uint32_t>(value));
    i = end;
  }
  return ids;
}

Status check_token_ids(std::span<const uint32_t> ids, uint32_t vocab_size) {
  for (uint32_t id : ids) {
    if (id >= vocab_size) {
      return make_error("unknown token id " + std::to_string(id) + " (the vocabulary has " +
                        std::to_string(vocab_size) + " tokens)");
    }
  }
  return ok_status();
}

}  // namespace kipp::cli
