#include "tokenizer/added_tokens.h"

namespace kipp {

void AddedTokenMatcher::add(std::string_view content, uint32_t id) {
  if (content.empty()) return;
  can_start_[static_cast<uint8_t>(content[0])] = true;
  uint32_t node = 0;
  for (const char c : content) {
    const auto byte = static_cast<uint8_t>(c);
    uint32_t child = kNoToken;
    for (const auto& [b, target] : nodes_[node].children) {
      if (b == byte) child = target;
    }
    if (child == kNoToken) {
      child = static_cast<uint32_t>(nodes_.size());
      nodes_[node].children.emplace_back(byte, child);
      nodes_.emplace_back();
    }
    node = child;
  }
  if (nodes_[node].token == kNoToken) nodes_[node].token = id;
}

std::pair<size_t, uint32_t> AddedTokenMatcher::longest_at(std::string_view text, size_t start) const {
  std::pair<size_t, uint32_t> best{0, kNoToken};
  uint32_t node = 0;
  for (size_t i = start; i < text.size(); ++i) {
    const auto byte = static_cast<uint8_t>(text[i]);
    uint32_t next = kNoToken;
    for (const auto& [b, target] : nodes_[node].children) {
      if (b == byte) {
        next = target;
        break;
      }
    }
    if (next == kNoToken) break;
    node = next;
    if (nodes_[node].token != kNoToken) best = {i + 1 - start, nodes_[node].token};
  }
  return best;
}

}  // namespace kipp
