// The JSON shapes of responses: completions and chat completions, whole or as SSE chunks, errors,
// usage and llama.cpp-style timings. Exactly the fields OpenAI clients parse, plus `timings`
// and `reasoning_content` (or `reasoning`, see ReasoningField). Tool calls go to
// `message.tool_calls` (streamed as `delta.tool_calls`: index, id, type and name first, then
// argument fragments). Token text that is not valid UTF-8 on its own (part of a character)
// is written with U+FFFD; chat logprobs carry the exact `bytes`.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/generation_request.h"
#include "server/openai_request.h"
#include "server/server_options.h"

namespace kipp::server {

struct ResponseIdentity {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;     // "cmpl-..." or "chatcmpl-..."
  std::string model;  // the served name
  int64_t created = 0;
  std::string system_fingerprint;
  ReasoningField reasoning_field = ReasoningField::ReasoningContent;  // chat
};

// A new identity with a random id and the current time.
ResponseIdentity make_identity(Endpoint endpoint, const std::string& model, const std::string& fingerprint);
// `digits` random hex digits, for ids.
std::string random_hex(size_t digits);

// One tool call of a choice, assembled from its tool-call delta events.
struct ToolCallText {
  std::string id, name, arguments;
};
// Adds a tool-call Delta event (tool_call_index set) to `calls`.
void add_tool_call_delta(std::vector<ToolCallText>& calls, const Event& event);

nlohmann::json error_json(const ApiError& error);
nlohmann::json usage_json(const Usage& usage);
nlohmann::json timings_json(const Usage& usage);
// JSON text safe for any bytes in strings (invalid UTF-8 replaced).
std::string dump(const nlohmann::json& value);

// Collects a request's events into the one non-streaming response.
class ResponseBuilder {
 public:
  ResponseBuilder(ResponseIdentity identity, uint32_t n, bool logprobs);
  void add(const Event& event);  // Delta and Finish events
  nlohmann::json finish(const Usage& usage) const;

 private:
  struct ChoiceText {
    std::string content, reasoning;
    std::vector<ToolCallText> tool_calls;
    std::vector<TokenReport> tokens;
    std::string finish_reason;
  };
  ResponseIdentity identity_;
  bool logprobs_;
  std::vector<ChoiceText> choices_;
};

// Turns events into SSE chunks ("data: {...}\n\n") for one streaming response.
class ChunkWriter {
 public:
  ChunkWriter(ResponseIdentity identity, uint32_t n, bool logprobs);
  std::string delta(const Event& event);        // Delta event
  std::string finish(const Event& event);       // Finish event
  std::string usage(const Usage& usage) const;  // the usage-only chunk (choices: [])
  static std::string error(const ApiError& error);
  static std::string done() { return "data: [DONE]\n\n"; }

 private:
  nlohmann::json chunk(nlohmann::json choice) const;
  nlohmann::json chat_delta(uint32_t index, nlohmann::json delta);
  ResponseIdentity identity_;
  bool logprobs_;
  std::vector<bool> role_sent_;        // chat: the first delta of a choice carries the role
  std::vector<uint64_t> text_offset_;  // completions logprobs: bytes of text before each token
};

}  // namespace kipp::server
