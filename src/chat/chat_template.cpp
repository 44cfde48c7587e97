// Chat formats: names, which one a model uses, the OpenAI-style messages parser, and the
// dispatch to the renderers (chat_qwen3.cpp, chat_formats.cpp).
#include "chat/chat_template.h"

#include <array>
#include <nlohmann/json.hpp>

#include "chat/chat_render.h"
#include "model/gguf_schema.h"

namespace kipp {
namespace {

constexpr std::array<std::pair<ChatFormat, std::string_view>, 6> kFormats{{
    {ChatFormat::Qwen3, "qwen3"},
    {ChatFormat::ChatML, "chatml"},
    {ChatFormat::Llama2, "llama2"},
    {ChatFormat::Llama3, "llama3"},
    {ChatFormat::Mistral, "mistral"},
    {ChatFormat::Alpaca, "alpaca"},
}};

std::string all_names() {
  std::string names;
  for (const auto& [format, name] : kFormats) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

// JSON text for an error message: a value's type, as the user wrote it.
std::string json_type(const nlohmann::ordered_json& value) { return value.type_name(); }

// An OpenAI assistant message's tool_calls: [{"id", "type": "function", "function": {"name",
// "arguments"}}]. The arguments are a string of JSON text (OpenAI's form, kept as is) or,
// leniently, a JSON object or array (rendered as the template's tojson renders it).
Expected<std::vector<ChatToolCall>> parse_tool_calls(size_t message, const nlohmann::ordered_json& calls) {
  const std::string where = "messages[" + std::to_string(message) + "].tool_calls";
  if (!calls.is_array()) return make_error(where + ": expected an array, found " + json_type(calls));
  std::vector<ChatToolCall> out;
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string at = where + "[" + std::to_string(j) + "]";
    const nlohmann::ordered_json& call = calls[j];
    if (!call.is_object()) return make_error(at + ": expected an object, found " + json_type(call));
    ChatToolCall parsed;
    if (const auto id = call.find("id"); id != call.end() && !id->is_null()) {
      if (!id->is_string()) return make_error(at + ".id: expected a string, found " + json_type(*id));
      parsed.id = id->get<std::string>();
    }
    if (const auto type = call.find("type"); type != call.end()) {
      if (!type->is_string() || type->get<std::string>() != "function") {
        return make_error(at + ".type: expected \"function\", found " + type->dump());
      }
    }
    const auto function = call.find("function");
    if (function == call.end()) return make_error(at + ".function is missing");
    if (!function->is_object()) return make_error(at + ".function: expected an object, found " + json_type(*function));
    const auto name = function->find("name");
    if (name == function->end()) return make_error(at + ".function.name is missing");
    if (!name->is_string()) return make_error(at + ".function.name: expected a string, found " + json_type(*name));
    parsed.name = name->get<std::string>();
    const auto arguments = function->find("arguments");
    if (arguments == function->end()) return make_error(at + ".function.arguments is missing");
    if (arguments->is_string()) {
      parsed.arguments = arguments->get<std::string>();
    } else if (arguments->is_object() || arguments->is_array()) {
      parsed.arguments = arguments->dump();
      parsed.arguments_is_json = true;
    } else {
      return make_error(at + ".function.arguments: expected a string (JSON text) or an object, found " +
                        json_type(*arguments));
    }
    out.push_back(std::move(parsed));
  }
  return out;
}

}  // namespace

namespace chat_detail {
Error message_error(size_t index, const std::string& what) {
  return make_error("messages[" + std::to_string(index) + "]: " + what);
}
}  // namespace chat_detail

std::string_view chat_format_name(ChatFormat format) {
  for (const auto& [f, name] : kFormats) {
    if (f == format) return name;
  }
  return "unknown";
}

Expected<ChatFormat> parse_chat_format(std::string_view name) {
  for (const auto& [format, known] : kFormats) {
    if (known == name) return format;
  }
  return make_error("unknown chat format '" + std::string(name) + "' (expected one of " + all_names() + ")");
}

std::vector<std::string_view> chat_format_names() {
  std::vector<std::string_view> names;
  for (const auto& [format, name] : kFormats) names.push_back(name);
  return names;
}

bool is_qwen3_chat_template(std::string_view chat_template) {
  // The markers of the Qwen3 hybrid-thinking template: ChatML turns, the enable_thinking switch
  // with its empty think block, and the reasoning handling keyed on last_query_index. The
  // Qwen3-*-2507 templates (instruct-only, thinking-only) lack enable_thinking and differ.
  for (std::string_view marker : {"<|im_start|>", "enable_thinking", "<think>\\n\\n</think>\\n\\n", "reasoning_content",
                                  "last_query_index", "<tool_response>"}) {
    if (chat_template.find(marker) == std::string_view::npos) return false;
  }
  return true;
}

Expected<ChatFormat> chat_format_of(const Model& model) {
  if (const GgufValue* recorded = model.gguf().find(gguf_key::kKippChatFormat)) {
    const std::string* name = recorded->as_string();
    if (name == nullptr) return make_error(std::string(gguf_key::kKippChatFormat) + " is not a string");
    return with_context(parse_chat_format(*name), std::string(gguf_key::kKippChatFormat));
  }
  const auto& chat_template = model.tokenizer().chat_template;
  if (model.provenance().variant == Variant::Base || !chat_template || chat_template->empty()) {
    return make_error("base checkpoints have no chat format; use generate");
  }
  if (!is_qwen3_chat_template(*chat_template)) {
    return make_error(
        "the model's tokenizer.chat_template is not the Qwen3 template the native renderer reproduces "
        "(a " +
        std::string(variant_name(model.provenance().variant)) +
        " checkpoint); record a format with `kipp convert --chat-format NAME` (" + all_names() + ")");
  }
  return ChatFormat::Qwen3;
}

Expected<std::string> render_chat(ChatFormat format, std::span<const ChatMessage> messages,
                                  const ChatOptions& options) {
  if (format != ChatFormat::Qwen3 && !options.tools.empty()) {
    return make_error("tools are only supported by the qwen3 chat format, not " +
                      std::string(chat_format_name(format)));
  }
  switch (format) {
    case ChatFormat::Qwen3: return chat_detail::render_qwen3(messages, options);
    case ChatFormat::ChatML: return chat_detail::render_chatml(messages, options);
    case ChatFormat::Llama2: return chat_detail::render_llama2(messages, options);
    case ChatFormat::Llama3: return chat_detail::render_llama3(messages, options);
    case ChatFormat::Mistral: return chat_detail::render_mistral(messages, options);
    case ChatFormat::Alpaca: return chat_detail::render_alpaca(messages, options);
  }
  return make_error("unknown chat format");
}

Expected<ChatRendering> render_chat_spans(ChatFormat format, std::span<const ChatMessage> messages,
                                          const ChatOptions& options) {
  ChatRendering rendering;
  if (format == ChatFormat::Qwen3) {
    KIPP_ASSIGN_OR_RETURN(rendering.text, chat_detail::render_qwen3(messages, options, &rendering.assistant_spans));
    return rendering;
  }
  KIPP_ASSIGN_OR_RETURN(rendering.text, render_chat(format, messages, options));
  ChatOptions open = options;
  open.add_generation_prompt = true;
  ChatOptions closed = options;
  closed.add_generation_prompt = false;
  size_t done = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    KIPP_ASSIGN_OR_RETURN(std::string before, render_chat(format, messages.first(i), open));
    KIPP_ASSIGN_OR_RETURN(std::string through, render_chat(format, messages.first(i + 1), closed));
    if (!rendering.text.starts_with(before) || !rendering.text.starts_with(through) || through.size() < before.size() ||
        before.size() < done) {
      return chat_detail::message_error(i, "the " + std::string(chat_format_name(format)) +
                                               " rendering of this assistant turn is not a continuation of the "
                                               "earlier messages'");
    }
    rendering.assistant_spans.push_back({before.size(), through.size()});
    done = through.size();
  }
  return rendering;
}

Expected<std::vector<ChatMessage>> parse_chat_messages(std::string_view json_text) {
  // Ordered: a tool call's JSON arguments are rendered with their keys in the order given.
  nlohmann::ordered_json parsed;
  try {
    parsed = nlohmann::ordered_json::parse(json_text);
  } catch (const nlohmann::json::parse_error& error) {
    return make_error(std::string("messages: invalid JSON: ") + error.what());
  }
  if (!parsed.is_array()) return make_error("messages: expected a JSON array of messages, found " + json_type(parsed));
  std::vector<ChatMessage> messages;
  messages.reserve(parsed.size());
  for (size_t i = 0; i < parsed.size(); ++i) {
    const nlohmann::ordered_json& item = parsed[i];
    const auto fail = [i](const std::string& what) { return chat_detail::message_error(i, what); };
    if (!item.is_object()) return fail("expected an object, found " + json_type(item));
    ChatMessage message;
    const auto role = item.find("role");
    if (role == item.end()) return fail("role is missing");
    if (!role->is_string()) return fail("role must be a string, found " + json_type(*role));
    message.role = role->get<std::string>();
    if (message.role != "system" && message.role != "user" && message.role != "assistant" && message.role != "tool") {
      return fail("role '" + message.role + "' is not supported (system, user, assistant, tool)");
    }
    const auto content = item.find("content");
    if (content == item.end()) return fail("content is missing (expected a string or null)");
    if (content->is_string()) {
      message.content = content->get<std::string>();
    } else if (!content->is_null()) {
      return fail("content must be a string or null, found " + json_type(*content) +
                  (content->is_array() ? " (content parts are unsupported)" : ""));
    }
    // "reasoning" is the name newer OpenAI-compatible servers use for reasoning_content.
    for (const char* key : {"reasoning_content", "reasoning"}) {
      const auto reasoning = item.find(key);
      if (reasoning == item.end() || reasoning->is_null()) continue;
      if (!reasoning->is_string())
        return fail(std::string(key) + " must be a string or null, found " + json_type(*reasoning));
      if (message.role != "assistant") return fail(std::string(key) + " is only allowed on assistant messages");
      const std::string text = reasoning->get<std::string>();
      if (message.reasoning_content && *message.reasoning_content != text) {
        return fail("reasoning_content and reasoning differ (give one of them)");
      }
      message.reasoning_content = text;
    }
    if (const auto calls = item.find("tool_calls"); calls != item.end() && !calls->is_null()) {
      KIPP_ASSIGN_OR_RETURN(message.tool_calls, parse_tool_calls(i, *calls));
      if (!message.tool_calls.empty() && message.role != "assistant") {
        return fail("tool_calls are only allowed on assistant messages");
      }
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

Expected<std::vector<std::string>> parse_chat_tools(std::string_view json_text) {
  nlohmann::ordered_json parsed;
  try {
    parsed = nlohmann::ordered_json::parse(json_text);
  } catch (const nlohmann::json::parse_error& error) {
    return make_error(std::string("tools: invalid JSON: ") + error.what());
  }
  if (!parsed.is_array()) return make_error(std::string("tools: expected a JSON array, found ") + parsed.type_name());
  std::vector<std::string> tools;
  for (size_t i = 0; i < parsed.size(); ++i) {
    if (!parsed[i].is_object()) {
      return make_error("tools[" + std::to_string(i) + "]: expected an object, found " + parsed[i].type_name());
    }
    tools.push_back(parsed[i].dump());
  }
  return tools;
}

}  // namespace kipp
