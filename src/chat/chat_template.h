// Chat rendering: conversations to prompt text. Qwen3 checkpoints are rendered by a native
// renderer that reproduces their own chat_template byte for byte; models trained here record
// one of the named formats in the GGUF (kipp.chat_format).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/model.h"

namespace kipp {

// One call an assistant message made (OpenAI's tool_calls[i].function).
struct ChatToolCall {
  std::string id;  // OpenAI's call id (not rendered by Qwen3)
  std::string name;
  // The arguments as given: a string (OpenAI's form, JSON text) is inserted as is; a JSON value
  // given as such (arguments_is_json) is rendered as the template's tojson renders it.
  std::string arguments;
  bool arguments_is_json = false;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  std::optional<std::string> reasoning_content;  // assistant thinking, if given separately
  std::vector<ChatToolCall> tool_calls = {};     // assistant only
};

struct ChatOptions {
  bool add_generation_prompt = true;
  bool enable_thinking = true;  // Qwen3: false renders the empty think block; others ignore it
  // Qwen3 only: the `tools` list, each one JSON object as text (OpenAI style
  // {"type": "function", "function": {...}}), rendered in the system turn as the template's
  // tojson does (Python json.dumps: ", " and ": " separators, key order kept, no ASCII escaping).
  std::vector<std::string> tools;
};

enum class ChatFormat { Qwen3, ChatML, Llama2, Llama3, Mistral, Alpaca };

std::string_view chat_format_name(ChatFormat format);  // "qwen3", "chatml", "llama2", ...
Expected<ChatFormat> parse_chat_format(std::string_view name);
std::vector<std::string_view> chat_format_names();  // every format, in enum order

// True when `chat_template` is the Qwen3 (hybrid thinking) template the native renderer
// reproduces: ChatML turns with enable_thinking, reasoning_content and last_query_index.
bool is_qwen3_chat_template(std::string_view chat_template);

// The model's chat format: Qwen3 for an instruct checkpoint with Qwen3's template, the recorded
// kipp.chat_format for a model trained here; an error for base checkpoints (no chat).
Expected<ChatFormat> chat_format_of(const Model& model);

// Unsupported roles or content are an error naming the message index.
Expected<std::string> render_chat(ChatFormat format, std::span<const ChatMessage> messages,
                                  const ChatOptions& options = {});

// Bytes [begin, end) of a rendering.
struct ChatSpan {
  size_t begin = 0;
  size_t end = 0;
};

// A rendering and, for each assistant message in order, the span of its turn that the model
// generates: from after the turn's header through its end-of-turn marker (for ChatML and Qwen3,
// after "<|im_start|>assistant\n" through "<|im_end|>\n"), as the turn renders within the
// whole conversation (Qwen3 drops the reasoning of turns before the last user query).
struct ChatRendering {
  std::string text;
  std::vector<ChatSpan> assistant_spans;
};

// Qwen3's renderer reports its spans as it renders. The other formats render incrementally:
// a turn starts where the rendering of the messages before it with the generation prompt ends
// and ends where the rendering through it ends; both must be prefixes of the whole, or the
// conversation is an error naming the message.
Expected<ChatRendering> render_chat_spans(ChatFormat format, std::span<const ChatMessage> messages,
                                          const ChatOptions& options);

// Parses an OpenAI-style messages array (JSON text): objects with "role" (system, user,
// assistant, tool), "content" (a string; null is the empty string), and on assistant messages
// optionally "reasoning_content" or its alias "reasoning" (string or null) and "tool_calls"
// ([{"id", "type": "function", "function": {"name", "arguments"}}], arguments a string of JSON
// text or a JSON object/array). Other keys (name, tool_call_id, ...) are ignored. Errors name
// the message index (and the tool call and field).
Expected<std::vector<ChatMessage>> parse_chat_messages(std::string_view json_text);

// Parses a tools array (JSON text) into ChatOptions::tools: each element must be an object.
Expected<std::vector<std::string>> parse_chat_tools(std::string_view json_text);

}  // namespace kipp
