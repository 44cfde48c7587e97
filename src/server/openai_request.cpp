#include "server/openai_request.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tokenizer/utf8.h"

namespace kipp::server {
namespace {

// Calls a forced tool_choice may make in one answer when parallel calls are allowed.
constexpr uint32_t kMaxForcedToolCalls = 8;

// Ordered: tools go to the chat template in the client's key order.
using json = nlohmann::ordered_json;

// Fields that change nothing in the output: accepted and ignored. (store: nothing is stored, so
// there is nothing to retrieve later; stream_options and, with tools, parallel_tool_calls are
// read below.)
constexpr std::array<std::string_view, 9> kIgnoredFields = {"user",         "metadata",         "store",
                                                            "service_tier", "prompt_cache_key", "safety_identifier",
                                                            "verbosity",    "stream_options",   "parallel_tool_calls"};
// Fields we know and do not honour: honouring them would change the output, so they are refused
// (unless given with the value that means "off", see refused_value).
constexpr std::array<std::string_view, 17> kRefusedFields = {"functions",
                                                             "function_call",
                                                             "logits_processors",
                                                             "guided_json",
                                                             "guided_regex",
                                                             "guided_choice",
                                                             "guided_grammar",
                                                             "min_tokens",
                                                             "ignore_eos",
                                                             "best_of",
                                                             "echo",
                                                             "suffix",
                                                             "prediction",
                                                             "audio",
                                                             "modalities",
                                                             "web_search_options",
                                                             "prompt_logprobs"};
constexpr std::array<std::string_view, 15> kCommonFields = {"model",
                                                            "n",
                                                            "max_tokens",
                                                            "temperature",
                                                            "top_p",
                                                            "top_k",
                                                            "min_p",
                                                            "frequency_penalty",
                                                            "presence_penalty",
                                                            "repetition_penalty",
                                                            "logit_bias",
                                                            "seed",
                                                            "stop",
                                                            "grammar",
                                                            "json_schema"};
constexpr std::array<std::string_view, 2> kStreamFields = {"stream", "logprobs"};
constexpr std::array<std::string_view, 1> kCompletionFields = {"prompt"};
constexpr std::array<std::string_view, 8> kChatFields = {
    "messages", "max_completion_tokens", "top_logprobs",    "chat_template_kwargs",
    "tools",    "tool_choice",           "response_format", "reasoning_effort"};

template <size_t N>
bool contains(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

ApiError invalid(std::string message, std::string param, std::string code = "") {
  ApiError error;
  error.message = std::move(message);
  error.param = std::move(param);
  error.code = std::move(code);
  return error;
}

std::string fmt(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

// Deepest nesting of arrays and objects, scanning outside strings; stops counting past `limit`.
uint32_t nesting_depth(std::string_view body, uint32_t limit) {
  uint32_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// A value "off" for a refused field: null, false, empty string/array/object, or the default
// that changes nothing.
bool refused_value_is_off(std::string_view field, const json& value, uint32_t n) {
  if (value.is_null()) return true;
  if (value.is_boolean()) return !value.get<bool>();
  if ((value.is_string() || value.is_array() || value.is_object()) && value.empty()) return true;
  if (field == "function_call") return value == "none" || value == "auto";
  if (field == "best_of") return value.is_number_integer() && value.get<int64_t>() == int64_t{n};
  if (field == "min_tokens") return value.is_number_integer() && value.get<int64_t>() == 0;
  if (field == "modalities") return value == json::array({"text"});
  return false;
}

struct Reader {
  const json& body;
  std::optional<ApiError> error;

  const json* get(const char* name) const {
    auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  }
  bool ok() const { return !error.has_value(); }
  void fail(std::string message, std::string param) {
    if (!error) error = invalid(std::move(message), std::move(param));
  }

  std::optional<int64_t> integer(const char* name, int64_t low, int64_t high) {
    const json* value = get(name);
    if (!value) return std::nullopt;
    if (!value->is_number_integer()) {
      fail(std::string(name) + " must be an integer", name);
      return std::nullopt;
    }
    // Unsigned values past INT64_MAX read as negative through get<int64_t>: check the sign kind.
    const bool huge = value->is_number_unsigned() && value->get<uint64_t>() > uint64_t(INT64_MAX);
    const int64_t v = huge ? INT64_MAX : value->get<int64_t>();
    if (huge || v < low || v > high) {
      fail(std::string(name) + " must be between " + std::to_string(low) + " and " + std::to_string(high) + ", found " +
               value->dump(),
           name);
      return std::nullopt;
    }
    return v;
  }

  std::optional<float> number(const char* name, double low, double high, bool low_open = false) {
    const json* value = get(name);
    if (!value) return std::nullopt;
    if (!value->is_number()) {
      fail(std::string(name) + " must be a number", name);
      return std::nullopt;
    }
    const double v = value->get<double>();
    if (!std::isfinite(v) || v > high || (low_open ? v <= low : v < low)) {
      fail(std::string(name) + " must be in " + (low_open ? "(" : "[") + fmt(low) + ", " + fmt(high) + "], found " +
               value->dump(),
           name);
      return std::nullopt;
    }
    return static_cast<float>(v);
  }

  std::optional<bool> boolean(const char* name) {
    const json* value = get(name);
    if (!value) return std::nullopt;
    if (!value->is_boolean()) {
      fail(std::string(name) + " must be a boolean", name);
      return std::nullopt;
    }
    return value->get<bool>();
  }
};

void read_stop(Reader& r, const RequestLimits& limits, OpenAiRequest& out) {
  const json* stop = r.get("stop");
  if (!stop) return;
  if (stop->is_string()) {
    out.stop.push_back(stop->get<std::string>());
  } else if (stop->is_array() && stop->size() <= limits.max_stop) {
    for (const json& s : *stop) {
      if (!s.is_string()) return r.fail("stop must be a string or a list of strings", "stop");
      out.stop.push_back(s.get<std::string>());
    }
  } else {
    return r.fail("stop must be a string or a list of at most " + std::to_string(limits.max_stop) + " strings", "stop");
  }
  // An empty stop string would stop nothing (the matcher ignores it); OpenAI ignores it too.
}

void read_logit_bias(Reader& r, OpenAiRequest& out) {
  const json* bias = r.get("logit_bias");
  if (!bias) return;
  if (!bias->is_object()) return r.fail("logit_bias must be an object mapping token ids to biases", "logit_bias");
  for (const auto& [key, value] : bias->items()) {
    const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
    const uint64_t id = digits ? std::stoull(key) : 0;
    if (!digits || id > UINT32_MAX) return r.fail("logit_bias: '" + key + "' is not a token id", "logit_bias");
    if (!value.is_number() || !std::isfinite(value.get<double>()) || std::abs(value.get<double>()) > 100)
      return r.fail("logit_bias: the bias of token " + key + " must be a number in [-100, 100]", "logit_bias");
    out.sampling.logit_bias.emplace_back(static_cast<uint32_t>(id), value.get<float>());
  }
}

void read_prompt(Reader& r, OpenAiRequest& out) {
  const json* prompt = r.get("prompt");
  if (!prompt) return r.fail("prompt is required", "prompt");
  const json* single = prompt;
  // A list holding one prompt (strings or token ids) is that prompt; batches are refused.
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array()))
    single = &(*prompt)[0];
  if (single->is_string()) {
    out.prompt_text = single->get<std::string>();
    return;
  }
  if (single->is_array() && !single->empty() &&
      std::all_of(single->begin(), single->end(), [](const json& v) { return v.is_number_unsigned(); })) {
    std::vector<uint32_t> ids;
    for (const json& v : *single) {
      if (v.get<uint64_t>() > UINT32_MAX) return r.fail("prompt: token id " + v.dump() + " is out of range", "prompt");
      ids.push_back(static_cast<uint32_t>(v.get<uint64_t>()));
    }
    out.prompt_tokens = std::move(ids);
    return;
  }
  if (prompt->is_array() && prompt->size() > 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array()))
    return r.fail("prompt: batches of prompts are not supported; send one request per prompt (n gives several choices)",
                  "prompt");
  r.fail("prompt must be a string, a list of token ids, or a list holding one of those", "prompt");
}

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}];
// arguments a string (JSON text, kept as is) or a JSON value (rendered as the template's tojson).
void read_tool_calls(Reader& r, const json& calls, const std::string& where, ChatMessage& message) {
  if (!calls.is_array()) return r.fail(where + " must be a list of tool calls", where);
  for (size_t c = 0; c < calls.size(); ++c) {
    const json& call = calls[c];
    const std::string at = where + "[" + std::to_string(c) + "]";
    if (!call.is_object()) return r.fail(at + " must be an object", at);
    for (const auto& [key, value] : call.items())
      if (key != "id" && key != "type" && key != "function" && key != "index")
        return r.fail(at + "." + key + " is not supported", at + "." + key);
    auto type = call.find("type");
    if (type != call.end() && !type->is_null() && *type != "function")
      return r.fail(at + ".type must be \"function\"", at + ".type");
    ChatToolCall out;
    auto id = call.find("id");
    if (id != call.end() && !id->is_null()) {
      if (!id->is_string()) return r.fail(at + ".id must be a string", at + ".id");
      out.id = id->get<std::string>();
    }
    auto function = call.find("function");
    if (function == call.end() || !function->is_object())
      return r.fail(at + ".function must be an object with name and arguments", at + ".function");
    auto name = function->find("name");
    if (name == function->end() || !name->is_string() || name->get<std::string>().empty())
      return r.fail(at + ".function.name must be a non-empty string", at + ".function.name");
    out.name = name->get<std::string>();
    auto arguments = function->find("arguments");
    if (arguments == function->end() || arguments->is_null()) {
      out.arguments = "{}";
    } else if (arguments->is_string()) {
      out.arguments = arguments->get<std::string>();
    } else {
      out.arguments = arguments->dump();
      out.arguments_is_json = true;
    }
    message.tool_calls.push_back(std::move(out));
  }
}

void read_messages(Reader& r, const RequestLimits& limits, OpenAiRequest& out) {
  const json* messages = r.get("messages");
  if (!messages) return r.fail("messages is required", "messages");
  if (!messages->is_array() || messages->empty())
    return r.fail("messages must be a non-empty list of messages", "messages");
  if (messages->size() > limits.max_messages)
    return r.fail("messages: at most " + std::to_string(limits.max_messages) + " messages, found " +
                      std::to_string(messages->size()),
                  "messages");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return r.fail(where + " must be an object", where);
    for (const auto& [key, value] : m.items()) {
      if (key == "role" || key == "content" || key == "reasoning_content" || key == "reasoning" || key == "name" ||
          key == "tool_call_id" || key == "tool_calls" || key == "refusal")
        continue;
      return r.fail(where + "." + key + " is not supported", where + "." + key);
    }
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return r.fail(where + ".role must be a string", where + ".role");
    ChatMessage message;
    message.role = role->get<std::string>();
    if (message.role == "developer") message.role = "system";  // OpenAI's newer name for it
    if (message.role != "system" && message.role != "user" && message.role != "assistant" && message.role != "tool")
      return r.fail(where + ".role '" + message.role + "' is not one of system, developer, user, assistant, tool",
                    where + ".role");
    for (const char* key : {"tool_call_id", "name", "refusal"}) {
      auto field = m.find(key);
      if (field != m.end() && !field->is_null() && !field->is_string())
        return r.fail(where + "." + key + " must be a string", where + "." + key);
    }
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      if (message.role != "assistant") return r.fail(where + ".content is required", where + ".content");
    } else if (content->is_string()) {
      message.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (size_t p = 0; p < content->size(); ++p) {
        const json& part = (*content)[p];
        const std::string part_where = where + ".content[" + std::to_string(p) + "]";
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string())
          return r.fail(part_where + ": only text parts ({\"type\": \"text\", \"text\": ...}) are supported",
                        part_where);
        if (!message.content.empty()) message.content += "\n";
        message.content += part["text"].get<std::string>();
      }
    } else {
      return r.fail(where + ".content must be a string or a list of text parts", where + ".content");
    }
    // Reasoning of an earlier turn: reasoning_content (DeepSeek, llama.cpp, vLLM) or reasoning
    // (OpenRouter, newer vLLM); the first given wins.
    for (const char* key : {"reasoning_content", "reasoning"}) {
      auto reasoning = m.find(key);
      if (reasoning == m.end() || reasoning->is_null()) continue;
      if (!reasoning->is_string() || message.role != "assistant")
        return r.fail(where + "." + key + " must be a string on an assistant message", where + "." + key);
      if (!message.reasoning_content) message.reasoning_content = reasoning->get<std::string>();
    }
    auto calls = m.find("tool_calls");
    if (calls != m.end() && !calls->is_null()) {
      if (message.role != "assistant")
        return r.fail(where + ".tool_calls is allowed on assistant messages only", where + ".tool_calls");
      read_tool_calls(r, *calls, where + ".tool_calls", message);
      if (!r.ok()) return;
    }
    out.messages.push_back(std::move(message));
  }
}

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}].
void read_tools(Reader& r, OpenAiRequest& out) {
  const json* tools = r.get("tools");
  if (!tools) return;
  if (!tools->is_array()) return r.fail("tools must be a list of function tools", "tools");
  for (size_t t = 0; t < tools->size(); ++t) {
    const json& tool = (*tools)[t];
    const std::string at = "tools[" + std::to_string(t) + "]";
    if (!tool.is_object()) return r.fail(at + " must be an object", at);
    for (const auto& [key, value] : tool.items())
      if (key != "type" && key != "function") return r.fail(at + "." + key + " is not supported", at + "." + key);
    if (tool.value("type", json()) != "function")
      return r.fail(at + ".type must be \"function\" (the only tool type served)", at + ".type");
    auto function = tool.find("function");
    if (function == tool.end() || !function->is_object())
      return r.fail(at + ".function must be an object", at + ".function");
    ToolDefinition definition;
    for (const auto& [key, value] : function->items()) {
      const std::string param = at + ".function." + key;
      if (key == "name") {
        if (!value.is_string()) return r.fail(param + " must be a string", param);
        definition.name = value.get<std::string>();
        const bool valid = !definition.name.empty() && definition.name.size() <= 64 &&
                           std::all_of(definition.name.begin(), definition.name.end(), [](char c) {
                             return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
                           });
        if (!valid) return r.fail(param + " must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -", param);
      } else if (key == "description") {
        if (!value.is_string() && !value.is_null()) return r.fail(param + " must be a string", param);
      } else if (key == "parameters") {
        if (!value.is_object()) return r.fail(param + " must be a JSON Schema object", param);
        definition.parameters = value.dump();
      } else if (key == "strict") {
        if (!value.is_boolean() && !value.is_null()) return r.fail(param + " must be a boolean", param);
        definition.strict = value.is_boolean() && value.get<bool>();
      } else {
        return r.fail(param + " is not supported", param);
      }
    }
    if (definition.name.empty()) return r.fail(at + ".function.name is required", at + ".function.name");
    for (const ToolDefinition& earlier : out.tools)
      if (earlier.name == definition.name)
        return r.fail(at + ".function.name '" + definition.name + "' is given twice", at + ".function.name");
    definition.json = tool.dump();
    out.tools.push_back(std::move(definition));
  }
}

// tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}}.
void read_tool_choice(Reader& r, OpenAiRequest& out) {
  if (auto parallel = r.boolean("parallel_tool_calls")) out.parallel_tool_calls = *parallel;
  const json* choice = r.get("tool_choice");
  if (!choice) return;
  if (choice->is_string()) {
    const std::string value = choice->get<std::string>();
    if (value == "none")
      out.tool_choice = ToolChoice::None;
    else if (value == "auto")
      out.tool_choice = ToolChoice::Auto;
    else if (value == "required")
      out.tool_choice = ToolChoice::Required;
    else
      return r.fail("tool_choice must be \"none\", \"auto\", \"required\" or a named function", "tool_choice");
  } else if (choice->is_object() && choice->value("type", json()) == "function" && choice->contains("function") &&
             (*choice)["function"].is_object() && (*choice)["function"].value("name", json()).is_string()) {
    out.tool_choice = ToolChoice::Named;
    out.tool_choice_name = (*choice)["function"]["name"].get<std::string>();
  } else {
    return r.fail(
        "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": "
        "{\"name\": ...}}",
        "tool_choice");
  }
  if (out.tools.empty() && (out.tool_choice == ToolChoice::Required || out.tool_choice == ToolChoice::Named))
    return r.fail("tool_choice needs tools to choose from", "tool_choice");
  if (out.tool_choice == ToolChoice::Named &&
      std::none_of(out.tools.begin(), out.tools.end(),
                   [&](const ToolDefinition& tool) { return tool.name == out.tool_choice_name; }))
    return r.fail("tool_choice names '" + out.tool_choice_name + "', which is not among the tools", "tool_choice");
}

// response_format (chat), and llama.cpp's json_schema and grammar (both endpoints): at most one.
void read_constraint(Reader& r, bool chat, OpenAiRequest& out) {
  OutputConstraint& c = out.constraint;
  const auto claim = [&](const char* param) {
    if (c.kind != OutputConstraint::Kind::None) {
      r.fail(std::string(param) + " cannot be combined with " + c.param + ": give one output constraint", param);
      return false;
    }
    c.param = param;
    return true;
  };
  if (const json* format = chat ? r.get("response_format") : nullptr) {
    if (!format->is_object() || !format->value("type", json()).is_string())
      return r.fail("response_format must be an object with a type", "response_format");
    for (const auto& [key, value] : format->items())
      if (key != "type" && key != "json_schema")
        return r.fail("response_format." + key + " is not supported", "response_format." + key);
    const std::string type = (*format)["type"].get<std::string>();
    if (type == "json_object") {
      if (!claim("response_format")) return;
      c.kind = OutputConstraint::Kind::JsonObject;
    } else if (type == "json_schema") {
      const json* spec = format->contains("json_schema") ? &(*format)["json_schema"] : nullptr;
      if (!spec || !spec->is_object())
        return r.fail("response_format.json_schema must be an object with name and schema",
                      "response_format.json_schema");
      for (const auto& [key, value] : spec->items()) {
        const std::string param = "response_format.json_schema." + key;
        if (key == "name") {
          if (!value.is_string()) return r.fail(param + " must be a string", param);
          c.name = value.get<std::string>();
        } else if (key == "schema") {
          if (!value.is_object() && !value.is_boolean()) return r.fail(param + " must be a JSON Schema", param);
          c.text = value.dump();
        } else if (key == "strict") {
          if (!value.is_boolean() && !value.is_null()) return r.fail(param + " must be a boolean", param);
          c.strict = value.is_boolean() && value.get<bool>();
        } else if (key != "description") {
          return r.fail(param + " is not supported", param);
        }
      }
      if (c.name.empty())
        return r.fail("response_format.json_schema.name is required", "response_format.json_schema.name");
      if (c.text.empty()) c.text = "{}";  // OpenAI: no schema means any JSON value
      if (!claim("response_format")) return;
      c.kind = OutputConstraint::Kind::JsonSchema;
    } else if (type != "text") {
      return r.fail("response_format.type must be \"text\", \"json_object\" or \"json_schema\"",
                    "response_format.type");
    }
  }
  if (const json* schema = r.get("json_schema")) {
    if (!schema->is_object() && !schema->is_boolean())
      return r.fail("json_schema must be a JSON Schema", "json_schema");
    if (!claim("json_schema")) return;
    c.kind = OutputConstraint::Kind::JsonSchema;
    c.text = schema->dump();
  }
  if (const json* grammar = r.get("grammar")) {
    if (!grammar->is_string()) return r.fail("grammar must be a string (GBNF)", "grammar");
    if (grammar->get<std::string>().empty()) return;  // llama.cpp: an empty grammar is none
    if (!claim("grammar")) return;
    c.kind = OutputConstraint::Kind::Grammar;
    c.text = grammar->get<std::string>();
  }
  // A forced call fixes the output to the call block: another constraint could not hold too.
  if (c.kind != OutputConstraint::Kind::None &&
      (out.tool_choice == ToolChoice::Required || out.tool_choice == ToolChoice::Named))
    return r.fail(c.param + " cannot be combined with a tool_choice that forces a call", c.param);
}

// reasoning_effort: none/minimal turn thinking off, low/medium/high leave it on. It must agree
// with chat_template_kwargs.enable_thinking when both are given.
void read_reasoning_effort(Reader& r, bool thinking_given, OpenAiRequest& out) {
  const json* effort = r.get("reasoning_effort");
  if (!effort) return;
  const std::string value = effort->is_string() ? effort->get<std::string>() : "";
  bool thinking = true;
  if (value == "none" || value == "minimal")
    thinking = false;
  else if (value != "low" && value != "medium" && value != "high")
    return r.fail("reasoning_effort must be one of none, minimal, low, medium, high", "reasoning_effort");
  if (thinking_given && thinking != out.enable_thinking)
    return r.fail("reasoning_effort '" + value + "' contradicts chat_template_kwargs.enable_thinking",
                  "reasoning_effort");
  out.enable_thinking = thinking;
}

void read_template_kwargs(Reader& r, OpenAiRequest& out) {
  const json* kwargs = r.get("chat_template_kwargs");
  if (!kwargs) return;
  if (!kwargs->is_object()) return r.fail("chat_template_kwargs must be an object", "chat_template_kwargs");
  for (const auto& [key, value] : kwargs->items()) {
    if (key != "enable_thinking")
      return r.fail("chat_template_kwargs." + key + " is not supported (only enable_thinking)",
                    "chat_template_kwargs." + key);
    if (!value.is_boolean())
      return r.fail("chat_template_kwargs.enable_thinking must be a boolean", "chat_template_kwargs.enable_thinking");
    out.enable_thinking = value.get<bool>();
  }
}

void read_fields(Reader& r, Endpoint endpoint, const RequestLimits& limits, OpenAiRequest& out) {
  const bool chat = endpoint == Endpoint::ChatCompletions;
  if (auto n = r.integer("n", 1, limits.max_n)) out.n = static_cast<uint32_t>(*n);  // first: best_of compares with it
  for (const auto& [key, value] : r.body.items()) {
    if (contains(kCommonFields, key) || contains(kStreamFields, key) || contains(kIgnoredFields, key)) continue;
    if (chat ? contains(kChatFields, key) : contains(kCompletionFields, key)) continue;
    if (contains(kRefusedFields, key)) {
      if (refused_value_is_off(key, value, out.n)) continue;
      return r.fail(key + " is not supported by this server", key);
    }
    if (!chat && contains(kChatFields, key)) return r.fail(key + " applies to /v1/chat/completions only", key);
    if (chat && contains(kCompletionFields, key)) return r.fail(key + " applies to /v1/completions only", key);
    return r.fail("Unrecognized request argument supplied: " + key, key);
  }
  if (const json* model = r.get("model")) {
    if (!model->is_string()) return r.fail("model must be a string", "model");
    out.model = model->get<std::string>();
  }
  if (chat) {
    read_messages(r, limits, out);
    read_template_kwargs(r, out);
    const json* kwargs = r.get("chat_template_kwargs");
    read_reasoning_effort(r, kwargs && kwargs->is_object() && kwargs->contains("enable_thinking"), out);
    read_tools(r, out);
    read_tool_choice(r, out);
  } else {
    read_prompt(r, out);
  }
  if (auto cap = r.integer("max_tokens", 1, UINT32_MAX)) out.max_tokens = static_cast<uint32_t>(*cap);
  if (chat)  // the newer name wins
    if (auto cap = r.integer("max_completion_tokens", 1, UINT32_MAX)) out.max_tokens = static_cast<uint32_t>(*cap);
  SamplingParams& s = out.sampling;
  if (auto v = r.number("temperature", 0, 2)) s.temperature = *v;
  if (auto v = r.number("top_p", 0, 1, true)) s.top_p = *v;
  if (auto v = r.integer("top_k", -1, INT32_MAX)) s.top_k = *v < 0 ? 0 : static_cast<uint32_t>(*v);  // -1: off (vLLM)
  if (auto v = r.number("min_p", 0, 1)) s.min_p = *v;
  if (auto v = r.number("frequency_penalty", -2, 2)) s.frequency_penalty = *v;
  if (auto v = r.number("presence_penalty", -2, 2)) s.presence_penalty = *v;
  if (auto v = r.number("repetition_penalty", 0, 10, true)) s.repetition_penalty = *v;
  if (auto v = r.integer("seed", INT64_MIN, INT64_MAX)) {
    s.seed = static_cast<uint64_t>(*v);
    out.seed_given = true;
  }
  read_logit_bias(r, out);
  read_stop(r, limits, out);
  read_constraint(r, chat, out);
  if (auto v = r.boolean("stream")) out.stream = *v;
  if (const json* options = r.get("stream_options")) {
    if (!options->is_object()) return r.fail("stream_options must be an object", "stream_options");
    if (!out.stream) return r.fail("stream_options is only allowed when stream is true", "stream_options");
    for (const auto& [key, value] : options->items()) {
      if (key != "include_usage" || !value.is_boolean())
        return r.fail("stream_options: only include_usage (a boolean) is supported", "stream_options." + key);
      out.include_usage = value.get<bool>();
    }
  }
  if (chat) {
    if (auto v = r.boolean("logprobs")) out.logprobs = *v;
    if (auto v = r.integer("top_logprobs", 0, 20)) {
      if (!out.logprobs) return r.fail("top_logprobs needs logprobs set to true", "top_logprobs");
      s.top_logprobs = static_cast<uint32_t>(*v);
    }
  } else if (auto v = r.integer("logprobs", 0, 5)) {  // legacy: the number of alternatives
    out.logprobs = true;
    s.top_logprobs = static_cast<uint32_t>(*v);
  }
}

// The grammar a request's output must follow, if any: its response_format, json_schema or
// grammar, or the call blocks of a forced tool_choice (the chosen tool's parameters schema).
std::variant<grammar::GrammarPtr, ApiError> request_grammar(const OpenAiRequest& request) {
  const OutputConstraint& constraint = request.constraint;
  if (constraint.kind == OutputConstraint::Kind::JsonObject) return grammar::any_json_object();
  if (constraint.kind != OutputConstraint::Kind::None) {
    auto compiled = constraint.kind == OutputConstraint::Kind::Grammar ? grammar::compile_gbnf(constraint.text)
                                                                       : grammar::compile_json_schema(constraint.text);
    if (!compiled.ok()) return invalid(constraint.param + ": " + compiled.message(), constraint.param);
    return std::move(*compiled);
  }
  if (request.tool_choice != ToolChoice::Required && request.tool_choice != ToolChoice::Named) return nullptr;
  std::vector<grammar::ToolSpec> tools;
  for (const ToolDefinition& tool : request.tools)
    if (request.tool_choice == ToolChoice::Required || tool.name == request.tool_choice_name)
      tools.push_back({tool.name, tool.parameters});
  auto compiled = grammar::compile_tool_calls(tools, request.parallel_tool_calls ? kMaxForcedToolCalls : 1);
  if (!compiled.ok()) return invalid(compiled.message(), "tools");
  return std::move(*compiled);
}

}  // namespace

std::variant<nlohmann::ordered_json, ApiError> parse_request_body(std::string_view body, const RequestLimits& limits) {
  if (auto bad = utf8::first_invalid_byte(body))
    return invalid("the request body is not valid UTF-8 (byte offset " + std::to_string(*bad) + ")", "");
  if (nesting_depth(body, limits.max_json_depth) > limits.max_json_depth)
    return invalid("the request body nests deeper than " + std::to_string(limits.max_json_depth) + " levels", "");
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return invalid("the request body is not valid JSON", "");
  if (!parsed.is_object()) return invalid("the request body must be a JSON object", "");
  return parsed;
}

std::variant<OpenAiRequest, ApiError> parse_openai_request(Endpoint endpoint, std::string_view body,
                                                           const RequestLimits& limits) {
  auto checked = parse_request_body(body, limits);
  if (auto* error = std::get_if<ApiError>(&checked)) return *error;
  const json& parsed = std::get<json>(checked);
  OpenAiRequest request;
  request.endpoint = endpoint;
  Reader reader{parsed, std::nullopt};
  read_fields(reader, endpoint, limits, request);
  if (!reader.ok()) return *reader.error;
  return request;
}

std::variant<GenerationRequest, ApiError> to_generation_request(const OpenAiRequest& request,
                                                                const PromptContext& context) {
  GenerationRequest out;
  const bool chat = request.endpoint == Endpoint::ChatCompletions;
  auto constraint = request_grammar(request);
  if (auto* error = std::get_if<ApiError>(&constraint)) return *error;
  out.grammar = std::get<grammar::GrammarPtr>(std::move(constraint));
  if (chat) {
    if (!context.chat_format)
      return invalid(
          "this model has no chat template (" + context.chat_format_error + "); use /v1/completions with a prompt",
          "messages", "model_not_chat");
    ChatOptions options;
    // A constrained answer starts at once: the think block is rendered empty, as with thinking
    // off, so the grammar covers the whole output and a bounded grammar ends in bounded tokens.
    options.enable_thinking = request.enable_thinking && !out.grammar;
    if (!request.tools.empty() && *context.chat_format != ChatFormat::Qwen3)
      return invalid("tools need a model with Qwen3's chat format; this model's is " +
                         std::string(chat_format_name(*context.chat_format)),
                     "tools");
    // tool_choice none: the model is not shown the tools, so it has nothing to call.
    if (request.tool_choice != ToolChoice::None)
      for (const ToolDefinition& tool : request.tools) options.tools.push_back(tool.json);
    out.parse_tool_calls = !options.tools.empty();
    if (!request.parallel_tool_calls) out.max_tool_calls = 1;
    for (const ToolDefinition& tool : request.tools)
      if (request.tool_choice != ToolChoice::Named || tool.name == request.tool_choice_name)
        out.tool_names.push_back(tool.name);
    auto text = render_chat(*context.chat_format, request.messages, options);
    if (!text.ok()) return invalid(text.message(), "messages");
    auto tokens = context.tokenizer->encode(*text, SpecialTokens::Parse);
    if (!tokens.ok()) return invalid(tokens.message(), "messages");
    out.prompt = std::move(*tokens);
    out.split_reasoning = *context.chat_format == ChatFormat::Qwen3;
    out.max_tokens = request.max_tokens;
  } else {
    if (request.prompt_tokens) {
      out.prompt = *request.prompt_tokens;
      for (size_t i = 0; i < out.prompt.size(); ++i)
        if (out.prompt[i] >= context.vocab_size)
          return invalid("prompt[" + std::to_string(i) + "]: token id " + std::to_string(out.prompt[i]) +
                             " is outside the vocabulary (size " + std::to_string(context.vocab_size) + ")",
                         "prompt");
    } else {
      auto tokens = context.tokenizer->encode(request.prompt_text.value_or(""), SpecialTokens::Parse);
      if (!tokens.ok()) return invalid(tokens.message(), "prompt");
      out.prompt = std::move(*tokens);
    }
    if (out.prompt.empty()) return invalid("the prompt is empty: there is nothing to continue from", "prompt");
    out.max_tokens = request.max_tokens.value_or(kDefaultCompletionMaxTokens);
  }
  for (const auto& [id, bias] : request.sampling.logit_bias)
    if (id >= context.vocab_size)
      return invalid("logit_bias: token id " + std::to_string(id) + " is outside the vocabulary (size " +
                         std::to_string(context.vocab_size) + ")",
                     "logit_bias");
  out.n = request.n;
  out.sampling = request.sampling;
  out.stop = request.stop;
  out.logprobs = request.logprobs;
  return out;
}

}  // namespace kipp::server
