// OpenAI request bodies to validated requests. Every field is checked (type, range) and every
// error names its `param`; a field we know but do not honour, and that would change the output
// if honoured (functions, logits_processors, ...), is an error rather than silently ignored;
// fields that do not change the output (user, metadata, store, prompt_cache_key, ...) are
// accepted; anything else is an "unrecognized request argument", as OpenAI answers.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "chat/chat_template.h"
#include "sampling/sampler.h"
#include "server/generation_request.h"
#include "tokenizer/tokenizer.h"

namespace kipp::server {

enum class Endpoint { Completions, ChatCompletions };

// An error in the OpenAI shape {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
};

struct RequestLimits {
  uint32_t max_n = 8;
  uint32_t max_messages = 1024;
  uint32_t max_stop = 16;
  uint32_t max_json_depth = 64;
};

// One function tool: its JSON as the client sent it (key order kept: the chat template renders
// it with tojson) and what a grammar needs (name, parameters schema as JSON text, empty if none).
struct ToolDefinition {
  std::string name;
  std::string json;
  std::string parameters;
  bool strict = false;
};

enum class ToolChoice { Auto, None, Required, Named };

// The one source that constrains the output, if any: response_format (json_object or
// json_schema), llama.cpp's top-level json_schema, or its grammar (GBNF). `text` is the schema
// (JSON text; empty for json_object) or the grammar; `param` the field it came from.
struct OutputConstraint {
  enum class Kind { None, JsonObject, JsonSchema, Grammar };
  Kind kind = Kind::None;
  std::string text;
  std::string param;
  std::string name;  // response_format.json_schema.name
  bool strict = false;
};

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::optional<std::string> model;
  std::optional<std::string> prompt_text;              // completions
  std::optional<std::vector<uint32_t>> prompt_tokens;  // completions, as token ids
  std::vector<ChatMessage> messages;                   // chat
  bool enable_thinking = true;                         // chat_template_kwargs.enable_thinking or reasoning_effort
  std::vector<ToolDefinition> tools;                   // chat
  ToolChoice tool_choice = ToolChoice::Auto;
  std::string tool_choice_name;  // ToolChoice::Named
  bool parallel_tool_calls = true;
  OutputConstraint constraint;
  uint32_t n = 1;
  std::optional<uint32_t> max_tokens;  // max_tokens or max_completion_tokens (the newer wins)
  SamplingParams sampling;             // temperature 1, top_p 1, no top_k, as OpenAI
  bool seed_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;  // chat: logprobs true; completions: logprobs N (N alternatives)
};

// A body as a JSON object (key order kept), after the checks every endpoint makes: valid UTF-8,
// nesting within limits.max_json_depth, valid JSON, an object.
std::variant<nlohmann::ordered_json, ApiError> parse_request_body(std::string_view body,
                                                                  const RequestLimits& limits = {});

// Parses and validates a body (UTF-8 JSON object).
std::variant<OpenAiRequest, ApiError> parse_openai_request(Endpoint endpoint, std::string_view body,
                                                           const RequestLimits& limits = {});

// The prompt as tokens and the scheduler's request. `chat_format` is the model's (an error for
// a base model on the chat endpoint: `chat_format_error` says why); completions parse special
// tokens in the prompt text, as `kipp generate` does.
struct PromptContext {
  const Tokenizer* tokenizer = nullptr;
  uint32_t vocab_size = 0;
  std::optional<ChatFormat> chat_format;
  std::string chat_format_error;
};
std::variant<GenerationRequest, ApiError> to_generation_request(const OpenAiRequest& request,
                                                                const PromptContext& context);

// Requests without a max_tokens: OpenAI's legacy completions default (16); chat completions get
// the scheduler's default (SchedulerOptions::default_max_tokens, capped by the context and pool).
inline constexpr uint32_t kDefaultCompletionMaxTokens = 16;

}  // namespace kipp::server
