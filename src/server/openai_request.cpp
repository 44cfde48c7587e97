#include "server/openai_request.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tokenizer/utf8.h"

namespace kipp::server {
namespace {

using json = nlohmann::json;

// Fields that change nothing in the output: accepted and ignored.
constexpr std::array<std::string_view, 6> kIgnoredFields = {
    "user", "metadata", "store", "service_tier", "parallel_tool_calls", "stream_options"};
// Fields we know and do not honour: honouring them would change the output, so they are refused
// (unless given with the value that means "off", see refused_value).
constexpr std::array<std::string_view, 23> kRefusedFields = {
    "tools",           "tool_choice",        "functions",      "function_call",
    "response_format", "logits_processors",  "guided_json",    "guided_regex",
    "guided_choice",   "guided_grammar",     "grammar",        "json_schema",
    "min_tokens",      "ignore_eos",         "best_of",        "echo",
    "suffix",          "reasoning_effort",   "prediction",     "audio",
    "modalities",      "web_search_options", "prompt_logprobs"};
constexpr std::array<std::string_view, 13> kCommonFields = {"model",
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
                                                            "stop"};
constexpr std::array<std::string_view, 2> kStreamFields = {"stream", "logprobs"};
constexpr std::array<std::string_view, 1> kCompletionFields = {"prompt"};
constexpr std::array<std::string_view, 4> kChatFields = {"messages", "max_completion_tokens", "top_logprobs",
                                                         "chat_template_kwargs"};

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
  if (field == "tool_choice" || field == "function_call") return value == "none" || value == "auto";
  if (field == "response_format") return value.is_object() && value.size() == 1 && value.value("type", "") == "text";
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
      if (key == "role" || key == "content" || key == "reasoning_content" || key == "name" || key == "tool_call_id")
        continue;
      if (key == "tool_calls" && (value.is_null() || (value.is_array() && value.empty()))) continue;
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
    auto reasoning = m.find("reasoning_content");
    if (reasoning != m.end() && !reasoning->is_null()) {
      if (!reasoning->is_string() || message.role != "assistant")
        return r.fail(where + ".reasoning_content must be a string on an assistant message",
                      where + ".reasoning_content");
      message.reasoning_content = reasoning->get<std::string>();
    }
    out.messages.push_back(std::move(message));
  }
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

}  // namespace

std::variant<OpenAiRequest, ApiError> parse_openai_request(Endpoint endpoint, std::string_view body,
                                                           const RequestLimits& limits) {
  if (auto bad = utf8::first_invalid_byte(body))
    return invalid("the request body is not valid UTF-8 (byte offset " + std::to_string(*bad) + ")", "");
  if (nesting_depth(body, limits.max_json_depth) > limits.max_json_depth)
    return invalid("the request body nests deeper than " + std::to_string(limits.max_json_depth) + " levels", "");
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return invalid("the request body is not valid JSON", "");
  if (!parsed.is_object()) return invalid("the request body must be a JSON object", "");
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
  if (chat) {
    if (!context.chat_format)
      return invalid(
          "this model has no chat template (" + context.chat_format_error + "); use /v1/completions with a prompt",
          "messages", "model_not_chat");
    ChatOptions options;
    options.enable_thinking = request.enable_thinking;
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
