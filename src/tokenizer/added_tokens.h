// Finds added tokens (<|im_start|>, <think>, ...) in raw text, leftmost-longest: the match
// that starts first wins, and among those the longest, as Hugging Face's Aho-Corasick
// (MatchKind::LeftmostLongest) does. A byte trie; positions whose byte cannot start a token
// are skipped with one table lookup, so text without added tokens costs almost nothing.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kipp {

class AddedTokenMatcher {
 public:
  struct Match {
    size_t start;
    size_t length;
    uint32_t id;
  };

  // Tokens must be non-empty; with duplicate contents the first one added wins.
  void add(std::string_view content, uint32_t id);
  bool empty() const { return nodes_.size() <= 1; }

  // Calls `on_text(start, length)` for each stretch between matches and `on_token(id)` for
  // each match, in order.
  template <typename OnText, typename OnToken>
  void scan(std::string_view text, OnText&& on_text, OnToken&& on_token) const {
    size_t last = 0;
    size_t i = 0;
    while (i < text.size()) {
      if (!can_start_[static_cast<uint8_t>(text[i])]) {
        ++i;
        continue;
      }
      const auto [length, id] = longest_at(text, i);
      if (length == 0) {
        ++i;
        continue;
      }
      if (i > last) on_text(last, i - last);
      on_token(id);
      i += length;
      last = i;
    }
    if (last < text.size()) on_text(last, text.size() - last);
  }

 private:
  static constexpr uint32_t kNoToken = UINT32_MAX;
  struct Node {
    std::vector<std::pair<uint8_t, uint32_t>> children;  // byte -> node, few per node
    uint32_t token = kNoToken;
  };
  // (length, id) of the longest token starting at `start`; length 0 when none.
  std::pair<size_t, uint32_t> longest_at(std::string_view text, size_t start) const;

  std::vector<Node> nodes_{Node{}};
  std::array<bool, 256> can_start_{};
};

}  // namespace kipp
