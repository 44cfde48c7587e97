// libFuzzer target for the tool-call parser (server/tool_call_parser.h); build and run with
// `scripts/fuzz.sh SECONDS tool_call`.
//
// First byte: bits 0-1 max_calls (unlimited, 1, 2, 0); bit 2 set: only the names "f" and
// "get_weather" are allowed. Second byte: seeds the cut points. The rest is the model's content.
// The text is parsed in one piece and again cut into pieces of 0 to 15 bytes; both must give the
// same content, calls (ids included: same id seed), stop and count. Every call must keep the
// parser's promises (allowed name, indexes in order, the id's shape, the max_calls limit).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parser.h"

namespace {

using kipp::server::ToolCallParser;

void check(bool condition) {
  if (!condition) __builtin_trap();
}

struct Result {
  std::string content;
  std::vector<ToolCallParser::Call> calls;
  bool stopped = false;
  uint32_t count = 0;
};

Result parse(std::string_view text, const ToolCallParser::Options& options, uint32_t cuts) {
  ToolCallParser parser(options);
  Result result;
  const auto take = [&](ToolCallParser::Output out) {
    result.content += out.content;
    for (auto& call : out.calls) result.calls.push_back(std::move(call));
  };
  size_t at = 0;
  while (at < text.size() && !parser.should_stop()) {
    size_t n = text.size() - at;
    if (cuts != 0) {
      cuts = cuts * 1103515245u + 12345u;  // a small LCG: the cut points follow the seed byte
      n = std::min<size_t>(n, (cuts >> 16) % 16);
    }
    take(parser.push(text.substr(at, n)));
    at += n;
  }
  take(parser.finish());
  result.stopped = parser.should_stop();
  result.count = parser.call_count();
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  ToolCallParser::Options options;
  constexpr uint32_t kMaxCalls[4] = {UINT32_MAX, 1, 2, 0};
  options.max_calls = kMaxCalls[data[0] & 3];
  if (data[0] & 4) options.allowed_names = {"f", "get_weather"};
  options.id_seed = 7;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  const Result whole = parse(text, options, 0);
  const Result pieces = parse(text, options, data[1] | 0x100u);
  check(whole.content == pieces.content);
  check(whole.stopped == pieces.stopped);
  check(whole.count == pieces.count);
  check(whole.calls.size() == pieces.calls.size());
  check(whole.calls.size() == whole.count);
  check(whole.count <= options.max_calls);
  check(whole.stopped == (whole.count == options.max_calls && whole.count > 0));
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    const auto& a = whole.calls[i];
    const auto& b = pieces.calls[i];
    check(a.index == i && b.index == i);
    check(a.id == b.id && a.name == b.name && a.arguments == b.arguments);
    check(a.id.size() == 29 && a.id.rfind("call_", 0) == 0);
    check(!a.name.empty());
    if (!options.allowed_names.empty()) check(a.name == "f" || a.name == "get_weather");
  }
  return 0;
}
