#include "server/openai_response.h"

#include <chrono>
#include <random>

namespace kipp::server {
namespace {

using json = nlohmann::json;

bool is_chat(const ResponseIdentity& identity) { return identity.endpoint == Endpoint::ChatCompletions; }

json string_json(const std::string& bytes) { return json(bytes); }  // dumped with replacement

json bytes_json(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(int{c});
  return out;
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null}.
json chat_logprobs(const std::vector<TokenReport>& tokens) {
  json content = json::array();
  for (const TokenReport& token : tokens) {
    json top = json::array();
    for (const TokenAlternative& alt : token.top)
      top.push_back({{"token", string_json(alt.bytes)}, {"logprob", alt.logprob}, {"bytes", bytes_json(alt.bytes)}});
    content.push_back({{"token", string_json(token.bytes)},
                       {"logprob", token.logprob},
                       {"bytes", bytes_json(token.bytes)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

// Legacy completions: parallel lists; top_logprobs maps token text to logprob.
json completion_logprobs(const std::vector<TokenReport>& tokens, uint64_t& offset) {
  json out{{"tokens", json::array()},
           {"token_logprobs", json::array()},
           {"top_logprobs", json::array()},
           {"text_offset", json::array()}};
  for (const TokenReport& token : tokens) {
    out["tokens"].push_back(string_json(token.bytes));
    out["token_logprobs"].push_back(token.logprob);
    json top = json::object();
    for (const TokenAlternative& alt : token.top) top[alt.bytes] = alt.logprob;
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(offset);
    offset += token.bytes.size();
  }
  return out;
}

json base(const ResponseIdentity& identity, const char* object) {
  return {{"id", identity.id},
          {"object", object},
          {"created", identity.created},
          {"model", identity.model},
          {"system_fingerprint", identity.system_fingerprint}};
}

// Puts the reasoning text where the server's --reasoning-field says.
void set_reasoning(json& message, const std::string& reasoning, ReasoningField field) {
  if (field != ReasoningField::Reasoning) message["reasoning_content"] = reasoning;
  if (field != ReasoningField::ReasoningContent) message["reasoning"] = reasoning;
}

}  // namespace

std::string random_hex(size_t digits) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(digits, '0');
  for (char& c : out) c = kHex[rng() & 15];
  return out;
}

void add_tool_call_delta(std::vector<ToolCallText>& calls, const Event& event) {
  const uint32_t index = *event.tool_call_index;
  if (index >= calls.size()) calls.resize(index + 1);
  ToolCallText& call = calls[index];
  if (!event.tool_call_id.empty()) call.id = event.tool_call_id;
  if (!event.tool_call_name.empty()) call.name = event.tool_call_name;
  call.arguments += event.tool_call_arguments;
}

ResponseIdentity make_identity(Endpoint endpoint, const std::string& model, const std::string& fingerprint) {
  ResponseIdentity identity;
  identity.endpoint = endpoint;
  identity.id = (endpoint == Endpoint::ChatCompletions ? "chatcmpl-" : "cmpl-") + random_hex(24);
  identity.model = model;
  identity.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  identity.system_fingerprint = fingerprint;
  return identity;
}

json error_json(const ApiError& error) {
  return {{"error",
           {{"message", error.message},
            {"type", error.type},
            {"param", error.param.empty() ? json(nullptr) : json(error.param)},
            {"code", error.code.empty() ? json(nullptr) : json(error.code)}}}};
}

json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

json timings_json(const Usage& usage) {
  const uint32_t evaluated = usage.prompt_tokens - usage.cached_tokens;
  const auto per_token = [](double ms, uint32_t n) { return n > 0 ? ms / n : 0.0; };
  const auto per_second = [](double ms, uint32_t n) { return ms > 0 ? 1000.0 * n / ms : 0.0; };
  return {{"cache_n", usage.cached_tokens},
          {"prompt_n", evaluated},
          {"prompt_ms", usage.prompt_ms},
          {"prompt_per_token_ms", per_token(usage.prompt_ms, evaluated)},
          {"prompt_per_second", per_second(usage.prompt_ms, evaluated)},
          {"predicted_n", usage.completion_tokens},
          {"predicted_ms", usage.generation_ms},
          {"predicted_per_token_ms", per_token(usage.generation_ms, usage.completion_tokens)},
          {"predicted_per_second", per_second(usage.generation_ms, usage.completion_tokens)},
          {"queue_ms", usage.queue_ms}};
}

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// ---------------------------------------------------------------- whole responses

ResponseBuilder::ResponseBuilder(ResponseIdentity identity, uint32_t n, bool logprobs)
    : identity_(std::move(identity)), logprobs_(logprobs), choices_(n) {}

void ResponseBuilder::add(const Event& event) {
  if (event.choice >= choices_.size()) return;
  ChoiceText& choice = choices_[event.choice];
  if (event.kind == Event::Kind::Finish) {
    choice.finish_reason = event.finish_reason;
    return;
  }
  choice.content += event.content;
  choice.reasoning += event.reasoning;
  if (event.tool_call_index) add_tool_call_delta(choice.tool_calls, event);
  choice.tokens.insert(choice.tokens.end(), event.tokens.begin(), event.tokens.end());
}

json ResponseBuilder::finish(const Usage& usage) const {
  const bool chat = is_chat(identity_);
  json out = base(identity_, chat ? "chat.completion" : "text_completion");
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const ChoiceText& c = choices_[i];
    json choice{{"index", i}};
    if (chat) {
      const bool no_content = c.content.empty() && !c.tool_calls.empty();
      json message{{"role", "assistant"}, {"content", no_content ? json(nullptr) : json(c.content)}};
      if (!c.reasoning.empty()) set_reasoning(message, c.reasoning, identity_.reasoning_field);
      if (!c.tool_calls.empty()) {
        json calls = json::array();
        for (const ToolCallText& call : c.tool_calls)
          calls.push_back({{"id", call.id},
                           {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        message["tool_calls"] = std::move(calls);
      }
      choice["message"] = std::move(message);
      choice["logprobs"] = logprobs_ ? chat_logprobs(c.tokens) : json(nullptr);
    } else {
      uint64_t offset = 0;
      choice["text"] = c.content;
      choice["logprobs"] = logprobs_ ? completion_logprobs(c.tokens, offset) : json(nullptr);
    }
    choice["finish_reason"] = c.finish_reason.empty() ? json(nullptr) : json(c.finish_reason);
    choices.push_back(std::move(choice));
  }
  out["choices"] = std::move(choices);
  out["usage"] = usage_json(usage);
  out["timings"] = timings_json(usage);
  return out;
}

// ---------------------------------------------------------------- SSE chunks

ChunkWriter::ChunkWriter(ResponseIdentity identity, uint32_t n, bool logprobs)
    : identity_(std::move(identity)), logprobs_(logprobs), role_sent_(n, false), text_offset_(n, 0) {}

json ChunkWriter::chunk(json choice) const {
  json out = base(identity_, is_chat(identity_) ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array({std::move(choice)});
  return out;
}

json ChunkWriter::chat_delta(uint32_t index, json delta) {
  if (index < role_sent_.size() && !role_sent_[index]) {
    delta["role"] = "assistant";
    role_sent_[index] = true;
  }
  return delta;
}

std::string ChunkWriter::delta(const Event& event) {
  const uint32_t index = event.choice;
  json choice{{"index", index}};
  if (is_chat(identity_)) {
    json delta = json::object();
    const bool other = !event.reasoning.empty() || event.tool_call_index.has_value();
    if (!event.content.empty() || !other) delta["content"] = event.content;
    if (!event.reasoning.empty()) set_reasoning(delta, event.reasoning, identity_.reasoning_field);
    if (event.tool_call_index) {
      // The first delta of a call names it (id, type, name); later ones carry argument fragments.
      json call{{"index", *event.tool_call_index}};
      json function = json::object();
      if (!event.tool_call_id.empty()) {
        call["id"] = event.tool_call_id;
        call["type"] = "function";
        function["name"] = event.tool_call_name;
      }
      function["arguments"] = event.tool_call_arguments;
      call["function"] = std::move(function);
      delta["tool_calls"] = json::array({std::move(call)});
    }
    choice["delta"] = chat_delta(index, std::move(delta));
    choice["logprobs"] = logprobs_ ? chat_logprobs(event.tokens) : json(nullptr);
  } else {
    choice["text"] = event.content;
    uint64_t scratch = 0;
    uint64_t& offset = index < text_offset_.size() ? text_offset_[index] : scratch;
    choice["logprobs"] = logprobs_ ? completion_logprobs(event.tokens, offset) : json(nullptr);
  }
  choice["finish_reason"] = nullptr;
  return "data: " + dump(chunk(std::move(choice))) + "\n\n";
}

std::string ChunkWriter::finish(const Event& event) {
  json choice{{"index", event.choice}};
  if (is_chat(identity_)) {
    choice["delta"] = chat_delta(event.choice, json::object());
  } else {
    choice["text"] = "";
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = event.finish_reason;
  return "data: " + dump(chunk(std::move(choice))) + "\n\n";
}

std::string ChunkWriter::usage(const Usage& usage) const {
  json out = base(identity_, is_chat(identity_) ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  out["timings"] = timings_json(usage);
  return "data: " + dump(out) + "\n\n";
}

std::string ChunkWriter::error(const ApiError& error) { return "data: " + dump(error_json(error)) + "\n\n"; }

}  // namespace kipp::server
