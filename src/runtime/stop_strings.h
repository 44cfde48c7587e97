// Stop strings over streamed text: text is held back while it could still become the start
// of a stop string, and the stop text itself is never emitted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kipp {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);  // empty strings are ignored

  struct Output {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string completed; `text` ends just before it
  };
  // Feeds newly decoded text. After a stop, further input is ignored (empty text, stopped
  // false: `stopped` is reported once, by the push that completed the stop string). When
  // several stop strings occur, the one that ends first wins (ties: the longer), so the result
  // does not depend on how the text is split into pushes. Works on bytes: with complete UTF-8
  // in and UTF-8 stop strings, the text out is always whole characters.
  Output push(std::string_view text);
  // End of generation without a stop: the held-back text (empty after a stop).
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace kipp
