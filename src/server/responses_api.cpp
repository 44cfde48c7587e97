#include "server/responses_api.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <utility>

namespace kipp::server {
namespace {

using json = nlohmann::ordered_json;

// Fields passed on to the chat request under the same name.
constexpr std::array<std::string_view, 16> kChatFields = {"model",
                                                          "temperature",
                                                          "top_p",
                                                          "stream",
                                                          "parallel_tool_calls",
                                                          "user",
                                                          "service_tier",
                                                          "prompt_cache_key",
                                                          "safety_identifier",
                                                          "top_k",
                                                          "min_p",
                                                          "seed",
                                                          "presence_penalty",
                                                          "frequency_penalty",
                                                          "repetition_penalty",
                                                          "logit_bias"};
// Accepted, changing nothing: nothing is stored (store), there is no encrypted reasoning to
// include, and stream_options only asks for obfuscation padding.
constexpr std::array<std::string_view, 4> kIgnoredFields = {"store", "include", "stream_options", "metadata"};
// Need state this server does not keep.
constexpr std::array<std::string_view, 3> kStatefulFields = {"previous_response_id", "conversation", "prompt"};

template <size_t N>
bool contains(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

ApiError invalid(std::string message, std::string param) {
  ApiError error;
  error.message = std::move(message);
  error.param = std::move(param);
  return error;
}

}  // namespace

ApiError with_responses_params(ApiError error) {
  static const std::array<std::pair<std::string_view, std::string_view>, 6> kNames = {{
      {"messages", "input"},
      {"max_completion_tokens", "max_output_tokens"},
      {"max_tokens", "max_output_tokens"},
      {"response_format.json_schema.", "text.format."},
      {"response_format", "text.format"},
      {"reasoning_effort", "reasoning.effort"},
  }};
  std::string& param = error.param;
  for (const auto& [chat, responses] : kNames)
    if (param.rfind(chat, 0) == 0) {
      param = std::string(responses) + (chat == "messages" ? "" : param.substr(chat.size()));
      break;
    }
  if (param.rfind("tools[", 0) == 0)
    if (const size_t at = param.find("].function"); at != std::string::npos) param.erase(at + 1, 9);
  return error;
}

namespace {

// Text of a content list of {type: input_text|output_text|text|reasoning_text|summary_text, text}.
std::optional<std::string> parts_text(const json& parts, const std::string& where, std::optional<ApiError>& error) {
  if (parts.is_string()) return parts.get<std::string>();
  if (!parts.is_array()) {
    error = invalid(where + " must be a string or a list of text parts", where);
    return std::nullopt;
  }
  std::string text;
  for (size_t p = 0; p < parts.size(); ++p) {
    const json& part = parts[p];
    const std::string at = where + "[" + std::to_string(p) + "]";
    static constexpr std::array<std::string_view, 5> kText = {"input_text", "output_text", "text", "reasoning_text",
                                                              "summary_text"};
    const json type = part.is_object() ? part.value("type", json()) : json();
    if (!type.is_string() || !contains(kText, type.get<std::string>()) || !part.contains("text") ||
        !part["text"].is_string()) {
      error = invalid(at + ": only text parts (input_text, output_text) are supported", at);
      return std::nullopt;
    }
    if (!text.empty()) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

// input (a string or a list of items) and instructions to chat messages. A function_call item
// joins the assistant message before it (one turn's calls are one message); a reasoning item
// goes to the next assistant message.
std::optional<ApiError> map_input(const json& body, json& messages) {
  std::optional<ApiError> error;
  if (auto it = body.find("instructions"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return invalid("instructions must be a string", "instructions");
    messages.push_back({{"role", "system"}, {"content", *it}});
  }
  auto input = body.find("input");
  if (input == body.end() || input->is_null()) return invalid("input is required", "input");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
    return std::nullopt;
  }
  if (!input->is_array()) return invalid("input must be a string or a list of items", "input");
  std::optional<std::string> reasoning;
  bool in_turn = false;  // the last message is an assistant turn that function calls may join
  const auto assistant = [&]() -> json& {
    if (!in_turn) {
      messages.push_back({{"role", "assistant"}, {"content", nullptr}});
      in_turn = true;
    }
    json& message = messages.back();
    if (reasoning) message["reasoning_content"] = *std::exchange(reasoning, std::nullopt);
    return message;
  };
  for (size_t i = 0; i < input->size(); ++i) {
    const json& item = (*input)[i];
    const std::string at = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) return invalid(at + " must be an object", at);
    const json type_value = item.value("type", json("message"));
    const std::string type = type_value.is_string() ? type_value.get<std::string>() : "";
    const auto string_field = [&](const char* key) -> std::optional<std::string> {
      auto field = item.find(key);
      if (field == item.end() || !field->is_string()) {
        error = invalid(at + "." + key + " must be a string", at + "." + key);
        return std::nullopt;
      }
      return field->get<std::string>();
    };
    if (type == "message") {
      const json role = item.value("role", json());
      static constexpr std::array<std::string_view, 4> kRoles = {"user", "system", "developer", "assistant"};
      if (!role.is_string() || !contains(kRoles, role.get<std::string>()))
        return invalid(at + ".role must be user, system, developer or assistant", at + ".role");
      auto content = parts_text(item.value("content", json()), at + ".content", error);
      if (!content) return error;
      if (role == "assistant") {
        json& message = assistant();
        const std::string before = message["content"].is_string() ? message["content"].get<std::string>() : "";
        message["content"] = before + *content;
      } else {
        messages.push_back({{"role", role}, {"content", *content}});
        in_turn = false;
      }
    } else if (type == "function_call") {
      auto call_id = string_field("call_id");
      auto name = call_id ? string_field("name") : std::nullopt;
      auto arguments = name ? string_field("arguments") : std::nullopt;
      if (!arguments) return error;
      json& message = assistant();
      if (!message.contains("tool_calls")) message["tool_calls"] = json::array();
      message["tool_calls"].push_back(
          {{"id", *call_id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", *arguments}}}});
    } else if (type == "function_call_output") {
      auto call_id = string_field("call_id");
      if (!call_id) return error;
      auto output = parts_text(item.value("output", json()), at + ".output", error);
      if (!output) return error;
      messages.push_back({{"role", "tool"}, {"tool_call_id", *call_id}, {"content", *output}});
      in_turn = false;
    } else if (type == "reasoning") {
      auto content = item.find("content");
      const bool has_content = content != item.end() && content->is_array() && !content->empty();
      auto text = parts_text(has_content ? *content : item.value("summary", json::array()), at, error);
      if (!text) return error;
      reasoning = *text;
      in_turn = false;  // it opens the next assistant turn
    } else {
      return invalid(
          at + ".type '" + type + "' is not supported (message, function_call, function_call_output, " + "reasoning)",
          at + ".type");
    }
  }
  return std::nullopt;
}

// The flat Responses tools to chat tools, key order kept.
std::optional<ApiError> map_tools(const json& tools, json& chat) {
  if (!tools.is_array()) return invalid("tools must be a list of function tools", "tools");
  json out = json::array();
  for (size_t t = 0; t < tools.size(); ++t) {
    const json& tool = tools[t];
    const std::string at = "tools[" + std::to_string(t) + "]";
    if (!tool.is_object() || tool.value("type", json()) != "function")
      return invalid(at + ".type must be \"function\" (the only tool type served)", at + ".type");
    json function = json::object();
    for (const auto& [key, value] : tool.items())
      if (key != "type") function[key] = value;
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  chat["tools"] = std::move(out);
  return std::nullopt;
}

std::optional<ApiError> map_tool_choice(const json& choice, json& chat) {
  if (choice.is_string()) {
    chat["tool_choice"] = choice;
  } else if (choice.is_object() && choice.value("type", json()) == "function" && choice.contains("name")) {
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  } else {
    return invalid("tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"name\": ...}",
                   "tool_choice");
  }
  return std::nullopt;
}

// text: {format: {type: text|json_object|json_schema, name, schema, strict, description}}.
std::optional<ApiError> map_text(const json& text, json& chat) {
  if (!text.is_object()) return invalid("text must be an object", "text");
  for (const auto& [key, value] : text.items())
    if (key != "format" && key != "verbosity") return invalid("text." + key + " is not supported", "text." + key);
  auto format = text.find("format");
  if (format == text.end() || format->is_null()) return std::nullopt;
  if (!format->is_object()) return invalid("text.format must be an object", "text.format");
  const json type = format->value("type", json());
  if (type == "json_schema") {
    json spec = json::object();
    for (const auto& [key, value] : format->items())
      if (key != "type") spec[key] = value;
    chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
  } else {
    chat["response_format"] = *format;
  }
  return std::nullopt;
}

std::optional<ApiError> map_reasoning(const json& reasoning, json& chat) {
  if (!reasoning.is_object()) return invalid("reasoning must be an object", "reasoning");
  for (const auto& [key, value] : reasoning.items()) {
    // summary: no summaries are written (the reasoning item carries the text itself).
    if (key == "summary" || key == "generate_summary") continue;
    if (key != "effort") return invalid("reasoning." + key + " is not supported", "reasoning." + key);
    if (!value.is_null()) chat["reasoning_effort"] = value;
  }
  return std::nullopt;
}

// The fields of the request the response object repeats, with OpenAI's defaults.
json make_echo(const json& body) {
  const auto given = [&](const char* key, json fallback) {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? fallback : *it;
  };
  json reasoning{{"effort", nullptr}, {"summary", nullptr}};
  if (auto it = body.find("reasoning"); it != body.end() && it->is_object())
    reasoning["effort"] = it->value("effort", json());
  json text{{"format", {{"type", "text"}}}};
  if (auto it = body.find("text");
      it != body.end() && it->is_object() && it->contains("format") && !(*it)["format"].is_null())
    text["format"] = (*it)["format"];
  return {{"instructions", given("instructions", nullptr)},
          {"max_output_tokens", given("max_output_tokens", nullptr)},
          {"metadata", given("metadata", json::object())},
          {"parallel_tool_calls", given("parallel_tool_calls", true)},
          {"reasoning", std::move(reasoning)},
          {"temperature", given("temperature", 1.0)},
          {"text", std::move(text)},
          {"tool_choice", given("tool_choice", "auto")},
          {"tools", given("tools", json::array())},
          {"top_p", given("top_p", 1.0)}};
}

}  // namespace

std::variant<ResponsesRequest, ApiError> parse_responses_request(std::string_view body, const RequestLimits& limits) {
  auto checked = parse_request_body(body, limits);
  if (auto* failed = std::get_if<ApiError>(&checked)) return *failed;
  const json& parsed = std::get<json>(checked);
  json chat = json::object();
  json messages = json::array();
  std::optional<ApiError> error;
  for (const auto& [key, value] : parsed.items()) {
    if (value.is_null() || key == "input" || key == "instructions") continue;
    if (contains(kChatFields, key)) {
      chat[key] = value;
    } else if (contains(kIgnoredFields, key)) {
      continue;
    } else if (contains(kStatefulFields, key)) {
      return invalid(key + " is not supported: this server is stateless (send the whole conversation as input)", key);
    } else if (key == "max_output_tokens") {
      chat["max_completion_tokens"] = value;
    } else if (key == "tools") {
      error = map_tools(value, chat);
    } else if (key == "tool_choice") {
      error = map_tool_choice(value, chat);
    } else if (key == "text") {
      error = map_text(value, chat);
    } else if (key == "reasoning") {
      error = map_reasoning(value, chat);
    } else if (key == "background" || key == "truncation" || key == "max_tool_calls" || key == "top_logprobs") {
      const bool off = value == false || value == "disabled" || value == 0;
      if (!off) return invalid(key + " is not supported by this server", key);
    } else {
      return invalid("Unrecognized request argument supplied: " + key, key);
    }
    if (error) return *error;
  }
  if ((error = map_input(parsed, messages))) return *error;
  if (messages.empty()) return invalid("input must hold at least one message", "input");
  chat["messages"] = std::move(messages);
  auto request = parse_openai_request(Endpoint::ChatCompletions, chat.dump(), limits);
  if (auto* failed = std::get_if<ApiError>(&request)) return with_responses_params(*failed);
  return ResponsesRequest{std::move(std::get<OpenAiRequest>(request)), make_echo(parsed)};
}

// ---------------------------------------------------------------- output items and events

ResponsesWriter::ResponsesWriter(ResponseIdentity identity, json echo, bool stream)
    : identity_(std::move(identity)), echo_(std::move(echo)), stream_(stream) {}

void ResponsesWriter::emit(std::string& out, const char* type, json fields) {
  if (!stream_) return;
  json event{{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : fields.items()) event[key] = std::move(value);
  out +=
      std::string("event: ") + type + "\ndata: " + event.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json ResponsesWriter::part_json(const Item& item) const {
  if (item.type == Item::Type::Reasoning) return {{"type", "reasoning_text"}, {"text", item.text}};
  return {{"type", "output_text"}, {"text", item.text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}

json ResponsesWriter::item_json(const Item& item) const {
  switch (item.type) {
    case Item::Type::Reasoning:
      return {{"type", "reasoning"},
              {"id", item.id},
              {"summary", json::array()},
              {"content", json::array({part_json(item)})},
              {"status", item.status}};
    case Item::Type::Message:
      return {{"type", "message"},
              {"id", item.id},
              {"role", "assistant"},
              {"status", item.status},
              {"content", json::array({part_json(item)})}};
    case Item::Type::FunctionCall: break;
  }
  return {{"type", "function_call"}, {"id", item.id},          {"call_id", item.call_id},
          {"name", item.name},       {"arguments", item.text}, {"status", item.status}};
}

ResponsesWriter::Item& ResponsesWriter::open(Item item, std::string& out) {
  close(out, "completed");
  static constexpr const char* kPrefix[] = {"rs_", "msg_", "fc_"};
  item.id = kPrefix[static_cast<int>(item.type)] + random_hex(24);
  items_.push_back(std::move(item));
  item_open_ = true;
  const Item& added = items_.back();
  const uint64_t index = items_.size() - 1;
  json shown = item_json(added);
  if (added.type == Item::Type::Message) shown["content"] = json::array();
  if (added.type == Item::Type::Reasoning) shown.erase("content");
  emit(out, "response.output_item.added", {{"output_index", index}, {"item", std::move(shown)}});
  if (added.type != Item::Type::FunctionCall)
    emit(out, "response.content_part.added",
         {{"item_id", added.id}, {"output_index", index}, {"content_index", 0}, {"part", part_json(added)}});
  return items_.back();
}

void ResponsesWriter::close(std::string& out, const std::string& status) {
  if (!item_open_) return;
  item_open_ = false;
  call_index_.reset();
  Item& item = items_.back();
  item.status = status;
  const uint64_t index = items_.size() - 1;
  const json where{{"item_id", item.id}, {"output_index", index}};
  const auto with = [&](json fields) {
    json all = where;
    for (auto& [key, value] : fields.items()) all[key] = std::move(value);
    return all;
  };
  switch (item.type) {
    case Item::Type::Reasoning:
      emit(out, "response.reasoning_text.done", with({{"content_index", 0}, {"text", item.text}}));
      break;
    case Item::Type::Message:
      emit(out, "response.output_text.done",
           with({{"content_index", 0}, {"text", item.text}, {"logprobs", json::array()}}));
      break;
    case Item::Type::FunctionCall:
      emit(out, "response.function_call_arguments.done", with({{"name", item.name}, {"arguments", item.text}}));
      break;
  }
  if (item.type != Item::Type::FunctionCall)
    emit(out, "response.content_part.done", with({{"content_index", 0}, {"part", part_json(item)}}));
  emit(out, "response.output_item.done", {{"output_index", index}, {"item", item_json(item)}});
}

std::string ResponsesWriter::start() {
  std::string out;
  emit(out, "response.created", {{"response", response()}});
  emit(out, "response.in_progress", {{"response", response()}});
  return out;
}

std::string ResponsesWriter::add(const Event& event) {
  std::string out;
  if (event.kind == Event::Kind::Finish) {
    finish_reason_ = event.finish_reason;
    close(out, event.finish_reason == "length" ? "incomplete" : "completed");
    return out;
  }
  const auto current = [&](Item::Type type) { return item_open_ && items_.back().type == type; };
  const auto delta = [&](const char* type, const std::string& text, bool part) {
    Item& item = items_.back();
    item.text += text;
    json fields{{"item_id", item.id}, {"output_index", items_.size() - 1}};
    if (part) fields["content_index"] = 0;
    fields["delta"] = text;
    if (item.type == Item::Type::Message) fields["logprobs"] = json::array();
    emit(out, type, std::move(fields));
  };
  if (!event.reasoning.empty()) {
    if (!current(Item::Type::Reasoning)) open(Item(Item::Type::Reasoning), out);
    delta("response.reasoning_text.delta", event.reasoning, true);
  }
  if (!event.content.empty()) {
    if (!current(Item::Type::Message)) open(Item(Item::Type::Message), out);
    delta("response.output_text.delta", event.content, true);
  }
  if (event.tool_call_index) {
    if (!current(Item::Type::FunctionCall) || call_index_ != event.tool_call_index) {
      open(Item(Item::Type::FunctionCall, event.tool_call_id, event.tool_call_name), out);
      call_index_ = event.tool_call_index;
    }
    if (!event.tool_call_arguments.empty())
      delta("response.function_call_arguments.delta", event.tool_call_arguments, false);
  }
  return out;
}

std::string ResponsesWriter::done(const Usage& usage) {
  std::string out;
  const std::string status = finish_reason_ == "length" ? "incomplete" : "completed";
  close(out, status);
  // A response always says something: an empty message when the model wrote no text or call.
  if (std::none_of(items_.begin(), items_.end(), [](const Item& item) { return item.type != Item::Type::Reasoning; })) {
    open(Item(Item::Type::Message), out);
    close(out, status);
  }
  usage_ = usage;
  emit(out, status == "incomplete" ? "response.incomplete" : "response.completed", {{"response", response()}});
  return out;
}

std::string ResponsesWriter::error(const ApiError& error) {
  std::string out;
  const json code = error.code.empty() ? json(nullptr) : json(error.code);
  const json param = error.param.empty() ? json(nullptr) : json(error.param);
  // OpenAI's fields at the top (the SDK's type), and under `error` (what its stream throws on).
  emit(out, "error",
       {{"code", code},
        {"message", error.message},
        {"param", param},
        {"error", {{"type", error.type}, {"code", code}, {"message", error.message}, {"param", param}}}});
  return out;
}

json ResponsesWriter::response() const {
  std::string status = "in_progress";
  if (usage_) status = finish_reason_ == "length" ? "incomplete" : "completed";
  json output = json::array();
  for (const Item& item : items_) output.push_back(item_json(item));
  json out{{"id", identity_.id},
           {"object", "response"},
           {"created_at", identity_.created},
           {"status", status},
           {"background", false},
           {"error", nullptr},
           {"incomplete_details", status == "incomplete" ? json{{"reason", "max_output_tokens"}} : json(nullptr)},
           {"model", identity_.model},
           {"output", std::move(output)},
           {"previous_response_id", nullptr},
           {"service_tier", "default"},
           {"store", false},
           {"truncation", "disabled"}};
  for (const auto& [key, value] : echo_.items()) out[key] = value;
  if (usage_) {
    out["usage"] = {{"input_tokens", usage_->prompt_tokens},
                    {"input_tokens_details", {{"cached_tokens", usage_->cached_tokens}}},
                    {"output_tokens", usage_->completion_tokens},
                    {"output_tokens_details", {{"reasoning_tokens", 0}}},
                    {"total_tokens", usage_->prompt_tokens + usage_->completion_tokens}};
  } else {
    out["usage"] = nullptr;
  }
  return out;
}

}  // namespace kipp::server
