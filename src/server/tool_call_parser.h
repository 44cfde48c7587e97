// Finds Qwen3's tool calls in streamed model content (after the think splitter): each
// "<tool_call>" {"name": STRING, "arguments": OBJECT or STRING} "</tool_call>" block becomes a
// call, everything else stays content. Works on pieces of any size, with the same result however
// the text is split: a possible start of the tag, and the whitespace before it, are held back
// until the next piece decides them.
//
// A block is turned into a call only when it is complete and valid (the JSON parses, it has
// exactly the keys name and arguments, the name is allowed); otherwise the raw block, with the
// whitespace before it, is content. Calls are therefore reported whole, when their block closes:
// streaming argument fragments earlier would announce calls that may later prove malformed and
// have to be taken back as content. Whitespace around a valid block is dropped (the template
// renders content, then "\n" before each call), so content and calls render back to the text.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace kipp::server {

class ToolCallParser {
 public:
  struct Options {
    // At most this many calls; the block of the last one ends the output (should_stop()) and
    // anything after it is dropped. 0: no calls at all (blocks stay content).
    uint32_t max_calls = UINT32_MAX;
    // The names a call may have (the request's tools, or the one tool_choice names); a call to
    // any other name stays content. Empty: any name.
    std::vector<std::string> allowed_names;
    // Seeds the call ids; none: seeded from std::random_device.
    std::optional<uint64_t> id_seed;
  };

  struct Call {
    uint32_t index = 0;  // 0, 1, ... in the order of the output
    std::string id;      // "call_" and 24 letters and digits
    std::string name;
    std::string arguments;  // JSON text: an object as compact JSON, a string argument as written
  };

  struct Output {
    std::string content;      // plain text, in order
    std::vector<Call> calls;  // calls whose blocks closed in this piece, in order
  };

  explicit ToolCallParser(Options options);

  Output push(std::string_view text);
  Output finish();  // end of output: a block still open is content

  bool should_stop() const { return state_ == State::Stopped; }  // max_calls reached: end the generation
  uint32_t call_count() const { return calls_; }                 // > 0: the finish reason is "tool_calls"

 private:
  enum class State { Text, Block, Stopped };
  void scan(Output& out);
  void close_block(std::string_view body, Output& out);
  std::optional<Call> parse_call(std::string_view body) const;
  std::string make_id();

  Options options_;
  std::mt19937_64 rng_;
  State state_ = State::Text;
  std::string held_;           // text not yet decided
  std::string pending_space_;  // the whitespace before the open block
  size_t searched_ = 0;        // Block: held_ has no close tag starting before this offset
  bool skip_space_ = false;    // just after a valid block: whitespace is dropped
  uint32_t calls_ = 0;
};

}  // namespace kipp::server
