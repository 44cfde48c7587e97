// OpenAI's Responses API (POST /v1/responses), stateless: a request's input items, instructions,
// flat function tools, text.format and reasoning.effort are mapped onto the chat completions
// request (the same OpenAiRequest, hence the same prompt and generation), and the events come
// back as the response object (reasoning, message and function_call output items) or as its SSE
// events (`event:` lines, `type` and `sequence_number` in each). Nothing is stored, so
// previous_response_id and conversation are refused.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/generation_request.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace kipp::server {

struct ResponsesRequest {
  OpenAiRequest chat;  // endpoint ChatCompletions, n = 1
  // What the response object repeats of the request: instructions, tools, tool_choice, text,
  // reasoning, temperature, top_p, max_output_tokens, parallel_tool_calls, metadata.
  nlohmann::ordered_json echo;
};

// Errors name the Responses API's params (input, max_output_tokens, text.format, tools[i].name).
std::variant<ResponsesRequest, ApiError> parse_responses_request(std::string_view body,
                                                                 const RequestLimits& limits = {});

// An error about the chat request a Responses request became, naming the Responses params
// (messages -> input, max_completion_tokens -> max_output_tokens, tools[i].function.name ->
// tools[i].name, ...).
ApiError with_responses_params(ApiError error);

// The events of one response as output items. Streaming: each call returns the SSE events it
// produced (empty when not streaming); finish() returns the response object either way.
class ResponsesWriter {
 public:
  ResponsesWriter(ResponseIdentity identity, nlohmann::ordered_json echo, bool stream);
  std::string start();                       // response.created, response.in_progress
  std::string add(const Event& event);       // Delta and Finish events
  std::string done(const Usage& usage);      // closes the open item; response.completed or .incomplete
  std::string error(const ApiError& error);  // the `error` event
  nlohmann::ordered_json response() const;   // the response object (after done(): complete)

 private:
  struct Item {
    enum class Type { Reasoning, Message, FunctionCall };
    explicit Item(Type t, std::string call = "", std::string function = "")
        : type(t), call_id(std::move(call)), name(std::move(function)) {}
    Type type;
    std::string id, call_id, name;
    std::string text;  // the reasoning, the output text or the arguments
    std::string status = "in_progress";
  };
  nlohmann::ordered_json item_json(const Item& item) const;
  nlohmann::ordered_json part_json(const Item& item) const;
  Item& open(Item item, std::string& out);
  void close(std::string& out, const std::string& status);
  void emit(std::string& out, const char* type, nlohmann::ordered_json fields);

  ResponseIdentity identity_;
  nlohmann::ordered_json echo_;
  bool stream_;
  std::vector<Item> items_;
  bool item_open_ = false;
  std::optional<uint32_t> call_index_;  // the tool call the open function_call item holds
  std::string finish_reason_;
  std::optional<Usage> usage_;
  uint64_t sequence_ = 0;
};

}  // namespace kipp::server
