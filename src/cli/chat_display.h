// `kipp chat` output: streamed answer text with the model's reasoning (<think>...</think>)
// shown distinctly, and the split of a finished answer into reasoning and content.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace kipp::cli {

// Writes streamed text to `out`. Styled (a terminal): the reasoning is dim and its tags are
// hidden; plain: the text exactly as generated, tags included.
class ThinkDisplay {
 public:
  ThinkDisplay(std::FILE* out, bool styled) : out_(out), styled_(styled) {}
  void push(std::string_view text);
  // End of the answer: flushes any held-back partial tag and restores the normal style.
  void finish();
  bool in_reasoning() const { return in_think_; }

 private:
  void emit(std::string_view text);

  std::FILE* out_;
  bool styled_;
  bool in_think_ = false;
  bool skip_newlines_ = false;  // just after a hidden tag
  char last_ = '\n';            // last character written
  std::string held_;            // a possible tag prefix
};

struct SplitAnswer {
  std::optional<std::string> reasoning;  // set when the answer opened a <think> block
  std::string content;
};

// Qwen3's own rule: the reasoning is what precedes </think> (after <think>), newlines trimmed;
// the content follows it with leading newlines removed. An unfinished block (cut off or
// interrupted) is all reasoning.
SplitAnswer split_answer(std::string_view text);

}  // namespace kipp::cli
