// Splits streamed model output into reasoning and answer: a <think>...</think> block at the start
// of the output (Qwen3's thinking mode) is reasoning, the rest is content. Works on pieces of
// any size: a possible tag prefix is held back until the next piece decides it. The newlines
// Qwen3 puts around the block ("<think>\n...\n</think>\n\n") are dropped.
#pragma once

#include <string>
#include <string_view>

namespace kipp::server {

class ThinkSplitter {
 public:
  struct Output {
    std::string reasoning;
    std::string content;
  };

  Output push(std::string_view text);
  Output finish();  // end of output: whatever is held back is final

 private:
  enum class State { Start, Reasoning, Content };
  void emit(std::string_view text, Output& out);

  State state_ = State::Start;
  bool skip_newlines_ = false;  // just after a tag
  std::string held_;
};

}  // namespace kipp::server
