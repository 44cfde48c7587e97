// The OpenAI-style messages and tools parsers, apart from the renderers so that the dataset
// readers (and their fuzz target) can use them without the model layer's sources.
#include "chat/chat_template.h"

#include <nlohmann/json.hpp>

#include "chat/chat_render.h"

namespace kipp {
namespace {

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
