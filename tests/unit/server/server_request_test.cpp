// OpenAI request parsing (src/server/openai_request.h): every accepted form of each field, and
// for every refusal the HTTP status and the `param` it names.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"
#include "unit/helpers/tokenizer_fixtures.h"

namespace kipp::server {
namespace {

OpenAiRequest parsed(Endpoint endpoint, const std::string& body) {
  auto result = parse_openai_request(endpoint, body);
  if (auto* error = std::get_if<ApiError>(&result)) ADD_FAILURE() << body << ": " << error->message;
  return std::holds_alternative<OpenAiRequest>(result) ? std::get<OpenAiRequest>(result) : OpenAiRequest{};
}

OpenAiRequest completion(const std::string& fields) {
  return parsed(Endpoint::Completions, R"({"prompt": "hi")" + fields + "}");
}
OpenAiRequest chat(const std::string& fields) {
  return parsed(Endpoint::ChatCompletions, R"({"messages": [{"role": "user", "content": "hi"}])" + fields + "}");
}

ApiError refused(Endpoint endpoint, const std::string& body) {
  auto result = parse_openai_request(endpoint, body);
  EXPECT_TRUE(std::holds_alternative<ApiError>(result)) << body << " was accepted";
  return std::holds_alternative<ApiError>(result) ? std::get<ApiError>(result) : ApiError{};
}

// The `param` a completions body with these extra fields is refused for (status 400).
std::string refused_param(const std::string& fields, Endpoint endpoint = Endpoint::Completions) {
  const std::string body = endpoint == Endpoint::Completions
                               ? R"({"prompt": "hi")" + fields + "}"
                               : R"({"messages": [{"role": "user", "content": "hi"}])" + fields + "}";
  const ApiError error = refused(endpoint, body);
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.type, "invalid_request_error");
  return error.param;
}

TEST(ServerRequest, DefaultsFollowOpenAI) {
  const OpenAiRequest r = completion("");
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_EQ(r.n, 1u);
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0u);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
  EXPECT_FALSE(r.seed_given);
}

TEST(ServerRequest, SamplingFieldsAreRead) {
  const OpenAiRequest r = completion(
      R"(, "model": "m", "n": 3, "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 40, "min_p": 0.1,
         "frequency_penalty": 0.5, "presence_penalty": -1, "repetition_penalty": 1.1, "seed": -1,
         "logit_bias": {"42": -100, "7": 2.5}, "stop": ["a", "bc"], "stream": true,
         "stream_options": {"include_usage": true}, "logprobs": 2, "user": "u", "metadata": {"k": "v"},
         "store": false, "service_tier": "auto")");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.n, 3u);
  EXPECT_EQ(r.max_tokens, 7u);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 40u);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.sampling.frequency_penalty, 0.5f);
  EXPECT_EQ(r.sampling.presence_penalty, -1.0f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.sampling.seed, UINT64_MAX);
  EXPECT_TRUE(r.seed_given);
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 2u);
  EXPECT_EQ(completion(R"(, "stop": "x")").stop, std::vector<std::string>{"x"});
  EXPECT_EQ(completion(R"(, "top_k": -1)").sampling.top_k, 0u);
  EXPECT_EQ(completion(R"(, "temperature": null)").sampling.temperature, 1.0f);  // null: absent
}

TEST(ServerRequest, PromptForms) {
  EXPECT_EQ(parsed(Endpoint::Completions, R"({"prompt": ["one"]})").prompt_text, "one");
  EXPECT_EQ(parsed(Endpoint::Completions, R"({"prompt": [1, 2, 3]})").prompt_tokens, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(parsed(Endpoint::Completions, R"({"prompt": [[4, 5]]})").prompt_tokens, (std::vector<uint32_t>{4, 5}));
  EXPECT_EQ(refused(Endpoint::Completions, R"({"prompt": ["a", "b"]})").param, "prompt");
  EXPECT_EQ(refused(Endpoint::Completions, R"({"prompt": [[1], [2]]})").param, "prompt");
  EXPECT_EQ(refused(Endpoint::Completions, R"({"prompt": [-1]})").param, "prompt");
  EXPECT_EQ(refused(Endpoint::Completions, R"({"prompt": 5})").param, "prompt");
  EXPECT_EQ(refused(Endpoint::Completions, R"({"model": "m"})").param, "prompt");
}

TEST(ServerRequest, RangesNameTheirParam) {
  EXPECT_EQ(refused_param(R"(, "n": 0)"), "n");
  EXPECT_EQ(refused_param(R"(, "n": 9)"), "n");
  EXPECT_EQ(refused_param(R"(, "n": 1.5)"), "n");
  EXPECT_EQ(refused_param(R"(, "max_tokens": 0)"), "max_tokens");
  EXPECT_EQ(refused_param(R"(, "max_tokens": 99999999999)"), "max_tokens");
  EXPECT_EQ(refused_param(R"(, "max_tokens": "5")"), "max_tokens");
  EXPECT_EQ(refused_param(R"(, "temperature": 2.5)"), "temperature");
  EXPECT_EQ(refused_param(R"(, "top_p": 0)"), "top_p");
  EXPECT_EQ(refused_param(R"(, "min_p": 1.5)"), "min_p");
  EXPECT_EQ(refused_param(R"(, "frequency_penalty": 3)"), "frequency_penalty");
  EXPECT_EQ(refused_param(R"(, "presence_penalty": -3)"), "presence_penalty");
  EXPECT_EQ(refused_param(R"(, "repetition_penalty": 0)"), "repetition_penalty");
  EXPECT_EQ(refused_param(R"(, "seed": 1e30)"), "seed");
  EXPECT_EQ(refused_param(R"(, "seed": 18446744073709551615)"), "seed");
  EXPECT_EQ(refused_param(R"(, "logit_bias": {"x": 1})"), "logit_bias");
  EXPECT_EQ(refused_param(R"(, "logit_bias": {"5": 101})"), "logit_bias");
  EXPECT_EQ(refused_param(R"(, "stop": [1])"), "stop");
  EXPECT_EQ(refused_param(R"(, "stream": "yes")"), "stream");
  EXPECT_EQ(refused_param(R"(, "logprobs": 6)"), "logprobs");
  EXPECT_EQ(refused_param(R"(, "stream_options": {"include_usage": true})"), "stream_options");
  EXPECT_EQ(refused_param(R"(, "stream": true, "stream_options": {"other": 1})"), "stream_options.other");
  EXPECT_EQ(refused_param(R"(, "model": 3)"), "model");
}

TEST(ServerRequest, FieldsThatWouldChangeTheOutputAreRefused) {
  for (const char* field :
       {R"(, "functions": [{"name": "f"}])", R"(, "function_call": {"name": "f"})", R"(, "logits_processors": ["x"])",
        R"(, "min_tokens": 3)", R"(, "guided_json": {"type": "object"})",
        R"(, "prediction": {"type": "content", "content": "x"})"}) {
    const std::string param = refused_param(field, Endpoint::ChatCompletions);
    EXPECT_NE(std::string(field).find(param), std::string::npos) << field << " named " << param;
  }
  EXPECT_EQ(refused_param(R"(, "echo": true)"), "echo");
  EXPECT_EQ(refused_param(R"(, "best_of": 3)"), "best_of");
  EXPECT_EQ(refused_param(R"(, "suffix": "end")"), "suffix");
  EXPECT_EQ(refused_param(R"(, "frobnicate": 1)"), "frobnicate");  // unknown: named, as OpenAI does
  // Their "off" values change nothing and pass.
  chat(R"(, "tools": [], "tool_choice": "none", "response_format": {"type": "text"}, "parallel_tool_calls": true)");
  completion(R"(, "echo": false, "best_of": 1, "suffix": null)");
}

TEST(ServerRequest, EndpointSpecificFields) {
  EXPECT_EQ(refused_param(R"(, "max_completion_tokens": 3)"), "max_completion_tokens");
  EXPECT_EQ(refused_param(R"(, "prompt": "x")", Endpoint::ChatCompletions), "prompt");
  // max_completion_tokens is the newer name and wins.
  EXPECT_EQ(chat(R"(, "max_tokens": 5, "max_completion_tokens": 9)").max_tokens, 9u);
  EXPECT_EQ(chat(R"(, "max_tokens": 5)").max_tokens, 5u);
  const OpenAiRequest logprobs = chat(R"(, "logprobs": true, "top_logprobs": 20)");
  EXPECT_TRUE(logprobs.logprobs);
  EXPECT_EQ(logprobs.sampling.top_logprobs, 20u);
  EXPECT_EQ(refused_param(R"(, "top_logprobs": 2)", Endpoint::ChatCompletions), "top_logprobs");
  EXPECT_EQ(refused_param(R"(, "logprobs": true, "top_logprobs": 21)", Endpoint::ChatCompletions), "top_logprobs");
  EXPECT_FALSE(chat(R"(, "chat_template_kwargs": {"enable_thinking": false})").enable_thinking);
  EXPECT_EQ(refused_param(R"(, "chat_template_kwargs": {"tools": 1})", Endpoint::ChatCompletions),
            "chat_template_kwargs.tools");
}

TEST(ServerRequest, Messages) {
  const OpenAiRequest r = parsed(Endpoint::ChatCompletions, R"({"messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "name": "x"},
      {"role": "assistant", "content": null, "reasoning_content": "hmm"},
      {"role": "user", "content": "c"}]})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "a\nb");
  EXPECT_EQ(r.messages[2].reasoning_content, "hmm");
  const auto param = [](const std::string& messages) {
    return refused(Endpoint::ChatCompletions, R"({"messages": )" + messages + "}").param;
  };
  EXPECT_EQ(param("[]"), "messages");
  EXPECT_EQ(param(R"([{"role": "wizard", "content": "x"}])"), "messages[0].role");
  EXPECT_EQ(param(R"([{"role": "user"}])"), "messages[0].content");
  EXPECT_EQ(param(R"([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])"),
            "messages[0].content[0]");
  EXPECT_EQ(param(R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [{}]}])"),
            "messages[1].tool_calls[0].function");
  RequestLimits limits;
  limits.max_messages = 2;
  auto many = parse_openai_request(Endpoint::ChatCompletions,
                                   R"({"messages": [{"role": "user", "content": "1"}, {"role": "user", "content": "2"},
                                                    {"role": "user", "content": "3"}]})",
                                   limits);
  ASSERT_TRUE(std::holds_alternative<ApiError>(many));
  EXPECT_EQ(std::get<ApiError>(many).param, "messages");
}

TEST(ServerRequest, FieldsThatChangeNothingAreAccepted) {
  const std::string ignored =
      R"(, "user": "u", "metadata": {"k": "v"}, "store": true, "service_tier": "auto", "prompt_cache_key": "k",
         "safety_identifier": "s", "verbosity": "low", "parallel_tool_calls": false)";
  chat(ignored);
  const OpenAiRequest r = completion(ignored);
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_EQ(refused_param(R"(, "frobnicate": true)", Endpoint::ChatCompletions), "frobnicate");
}

TEST(ServerRequest, ToolsKeepTheClientsKeyOrder) {
  const OpenAiRequest r = chat(R"(, "tools": [
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"zip": {"type": "string"}, "city": {"type": "string"}}}, "description": "Weather", "strict": true}},
      {"function": {"name": "a-b_9"}, "type": "function"}])");
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools[0].json,
            R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":)"
            R"({"zip":{"type":"string"},"city":{"type":"string"}}},"description":"Weather","strict":true}})");
  EXPECT_EQ(r.tools[0].parameters,
            R"({"type":"object","properties":{"zip":{"type":"string"},"city":{"type":"string"}}})");
  EXPECT_TRUE(r.tools[0].strict);
  EXPECT_EQ(r.tools[1].json, R"({"function":{"name":"a-b_9"},"type":"function"})");
  EXPECT_EQ(r.tools[1].parameters, "");
  EXPECT_FALSE(r.tools[1].strict);
  EXPECT_EQ(r.tool_choice, ToolChoice::Auto);
  EXPECT_TRUE(r.parallel_tool_calls);
}

TEST(ServerRequest, BadToolsNameTheirParam) {
  const auto param = [](const std::string& tools) {
    return refused_param(R"(, "tools": )" + tools, Endpoint::ChatCompletions);
  };
  EXPECT_EQ(param(R"({"type": "function"})"), "tools");
  EXPECT_EQ(param(R"([3])"), "tools[0]");
  EXPECT_EQ(param(R"([{"type": "web_search"}])"), "tools[0].type");
  EXPECT_EQ(param(R"([{"type": "function"}])"), "tools[0].function");
  EXPECT_EQ(param(R"([{"type": "function", "function": {}}])"), "tools[0].function.name");
  EXPECT_EQ(param(R"([{"type": "function", "function": {"name": "has space"}}])"), "tools[0].function.name");
  EXPECT_EQ(param(R"([{"type": "function", "function": {"name": ")" + std::string(65, 'a') + R"("}}])"),
            "tools[0].function.name");
  chat(R"(, "tools": [{"type": "function", "function": {"name": ")" + std::string(64, 'a') + R"("}}])");
  EXPECT_EQ(param(R"([{"type": "function", "function": {"name": "f", "parameters": "x"}}])"),
            "tools[0].function.parameters");
  EXPECT_EQ(param(R"([{"type": "function", "function": {"name": "f", "strict": 1}}])"), "tools[0].function.strict");
  EXPECT_EQ(param(R"([{"type": "function", "function": {"name": "f", "other": 1}}])"), "tools[0].function.other");
  EXPECT_EQ(param(R"([{"type": "function", "function": {"name": "f"}, "x": 1}])"), "tools[0].x");
  EXPECT_EQ(
      param(R"([{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])"),
      "tools[1].function.name");
  EXPECT_EQ(refused_param(R"(, "tools": [{"type": "function", "function": {"name": "f"}}])"), "tools");  // chat only
}

TEST(ServerRequest, ToolChoice) {
  const std::string tools = R"(, "tools": [{"type": "function", "function": {"name": "f"}},
                                            {"type": "function", "function": {"name": "g"}}])";
  EXPECT_EQ(chat(tools + R"(, "tool_choice": "none")").tool_choice, ToolChoice::None);
  EXPECT_EQ(chat(tools + R"(, "tool_choice": "auto")").tool_choice, ToolChoice::Auto);
  EXPECT_EQ(chat(tools + R"(, "tool_choice": "required")").tool_choice, ToolChoice::Required);
  const OpenAiRequest named = chat(tools + R"(, "tool_choice": {"type": "function", "function": {"name": "g"}},
                                              "parallel_tool_calls": false)");
  EXPECT_EQ(named.tool_choice, ToolChoice::Named);
  EXPECT_EQ(named.tool_choice_name, "g");
  EXPECT_FALSE(named.parallel_tool_calls);
  const auto param = [](const std::string& fields) { return refused_param(fields, Endpoint::ChatCompletions); };
  EXPECT_EQ(param(tools + R"(, "tool_choice": {"type": "function", "function": {"name": "h"}})"), "tool_choice");
  EXPECT_EQ(param(tools + R"(, "tool_choice": "any")"), "tool_choice");
  EXPECT_EQ(param(tools + R"(, "tool_choice": {"type": "function"})"), "tool_choice");
  EXPECT_EQ(param(R"(, "tool_choice": "required")"), "tool_choice");  // nothing to choose from
  EXPECT_EQ(param(tools + R"(, "parallel_tool_calls": "no")"), "parallel_tool_calls");
  chat(R"(, "tool_choice": "auto")");  // without tools: changes nothing
}

TEST(ServerRequest, OutputConstraints) {
  EXPECT_EQ(chat(R"(, "response_format": {"type": "text"})").constraint.kind, OutputConstraint::Kind::None);
  const OpenAiRequest object = chat(R"(, "response_format": {"type": "json_object"})");
  EXPECT_EQ(object.constraint.kind, OutputConstraint::Kind::JsonObject);
  EXPECT_EQ(object.constraint.param, "response_format");
  const OpenAiRequest schema = chat(R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "n",
      "description": "d", "strict": true, "schema": {"type": "object", "required": ["b", "a"]}}})");
  EXPECT_EQ(schema.constraint.kind, OutputConstraint::Kind::JsonSchema);
  EXPECT_EQ(schema.constraint.text, R"({"type":"object","required":["b","a"]})");
  EXPECT_EQ(schema.constraint.name, "n");
  EXPECT_TRUE(schema.constraint.strict);
  for (Endpoint endpoint : {Endpoint::Completions, Endpoint::ChatCompletions}) {
    const std::string start = endpoint == Endpoint::Completions ? R"({"prompt": "hi")"
                                                                : R"({"messages": [{"role": "user", "content": "hi"}])";
    const OpenAiRequest top = parsed(endpoint, start + R"(, "json_schema": {"type": "integer"}})");
    EXPECT_EQ(top.constraint.kind, OutputConstraint::Kind::JsonSchema);
    EXPECT_EQ(top.constraint.param, "json_schema");
    EXPECT_EQ(top.constraint.text, R"({"type":"integer"})");
    const OpenAiRequest gbnf = parsed(endpoint, start + R"(, "grammar": "root ::= \"yes\""})");
    EXPECT_EQ(gbnf.constraint.kind, OutputConstraint::Kind::Grammar);
    EXPECT_EQ(gbnf.constraint.text, R"(root ::= "yes")");
    EXPECT_EQ(refused_param(R"(, "json_schema": {}, "grammar": "root ::= \"a\"")", endpoint), "grammar");
    EXPECT_EQ(refused_param(R"(, "grammar": 5)", endpoint), "grammar");
    EXPECT_EQ(refused_param(R"(, "json_schema": "x")", endpoint), "json_schema");
  }
  const auto param = [](const std::string& fields) { return refused_param(fields, Endpoint::ChatCompletions); };
  EXPECT_EQ(param(R"(, "response_format": {"type": "json_object"}, "json_schema": {})"), "json_schema");
  EXPECT_EQ(param(R"(, "response_format": {"type": "xml"})"), "response_format.type");
  EXPECT_EQ(param(R"(, "response_format": "json")"), "response_format");
  EXPECT_EQ(param(R"(, "response_format": {"type": "json_schema"})"), "response_format.json_schema");
  EXPECT_EQ(param(R"(, "response_format": {"type": "json_schema", "json_schema": {"schema": {}}})"),
            "response_format.json_schema.name");
  EXPECT_EQ(param(R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": 3}})"),
            "response_format.json_schema.schema");
  EXPECT_EQ(param(R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "n", "x": 3}})"),
            "response_format.json_schema.x");
  EXPECT_EQ(param(R"(, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required",
                     "response_format": {"type": "json_object"})"),
            "response_format");
  EXPECT_EQ(refused_param(R"(, "response_format": {"type": "json_object"})"), "response_format");  // chat only
}

TEST(ServerRequest, ReasoningEffortTurnsThinkingOnOrOff) {
  for (const char* off : {"none", "minimal"})
    EXPECT_FALSE(chat(std::string(R"(, "reasoning_effort": ")") + off + "\"").enable_thinking) << off;
  for (const char* on : {"low", "medium", "high"})
    EXPECT_TRUE(chat(std::string(R"(, "reasoning_effort": ")") + on + "\"").enable_thinking) << on;
  EXPECT_FALSE(
      chat(R"(, "reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": false})").enable_thinking);
  const auto param = [](const std::string& fields) { return refused_param(fields, Endpoint::ChatCompletions); };
  EXPECT_EQ(param(R"(, "reasoning_effort": "max")"), "reasoning_effort");
  EXPECT_EQ(param(R"(, "reasoning_effort": 1)"), "reasoning_effort");
  EXPECT_EQ(param(R"(, "reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": false})"),
            "reasoning_effort");
}

TEST(ServerRequest, AssistantToolCallsAndToolResults) {
  const OpenAiRequest r = parsed(Endpoint::ChatCompletions, R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "reasoning": "think",
       "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "w", "arguments": "{\"c\": 1}"}},
                      {"id": "call_2", "type": "function", "function": {"name": "v", "arguments": {"z": 1, "a": [2]}}}]},
      {"role": "tool", "tool_call_id": "call_1", "name": "w", "content": "sunny"},
      {"role": "assistant", "content": "ok", "reasoning_content": "first", "reasoning": "second"}]})");
  ASSERT_EQ(r.messages.size(), 4u);
  const ChatMessage& call = r.messages[1];
  EXPECT_EQ(call.content, "");
  EXPECT_EQ(call.reasoning_content, "think");
  ASSERT_EQ(call.tool_calls.size(), 2u);
  EXPECT_EQ(call.tool_calls[0].id, "call_1");
  EXPECT_EQ(call.tool_calls[0].name, "w");
  EXPECT_EQ(call.tool_calls[0].arguments, R"({"c": 1})");  // a string: as is
  EXPECT_FALSE(call.tool_calls[0].arguments_is_json);
  EXPECT_EQ(call.tool_calls[1].arguments, R"({"z":1,"a":[2]})");  // a value: key order kept
  EXPECT_TRUE(call.tool_calls[1].arguments_is_json);
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].content, "sunny");
  EXPECT_EQ(r.messages[3].reasoning_content, "first");
  const auto param = [](const std::string& messages) {
    return refused(Endpoint::ChatCompletions, R"({"messages": )" + messages + "}").param;
  };
  EXPECT_EQ(param(R"([{"role": "user", "content": "x", "tool_calls": []}])"), "messages[0].tool_calls");
  EXPECT_EQ(param(R"([{"role": "assistant", "tool_calls": {}}])"), "messages[0].tool_calls");
  EXPECT_EQ(param(R"([{"role": "assistant", "tool_calls": [{"type": "custom", "function": {"name": "f"}}]}])"),
            "messages[0].tool_calls[0].type");
  EXPECT_EQ(param(R"([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}])"),
            "messages[0].tool_calls[0].function.name");
  EXPECT_EQ(param(R"([{"role": "assistant", "tool_calls": [{"id": 5, "function": {"name": "f"}}]}])"),
            "messages[0].tool_calls[0].id");
  EXPECT_EQ(param(R"([{"role": "tool", "tool_call_id": 3, "content": "x"}])"), "messages[0].tool_call_id");
  EXPECT_EQ(param(R"([{"role": "user", "content": "x", "reasoning": "y"}])"), "messages[0].reasoning");
}

TEST(ServerRequest, MalformedBodies) {
  EXPECT_EQ(refused(Endpoint::Completions, "{").status, 400);
  EXPECT_EQ(refused(Endpoint::Completions, "[1]").status, 400);
  EXPECT_NE(refused(Endpoint::Completions, "{\"prompt\": \"\xff\"}").message.find("UTF-8"), std::string::npos);
  const std::string deep = "{\"prompt\": " + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_NE(refused(Endpoint::Completions, deep).message.find("nests"), std::string::npos);
  // Brackets inside strings do not count as nesting.
  EXPECT_EQ(completion(", \"stop\": \"" + std::string(100, '[') + "\"").stop.size(), 1u);
}

class ServerPromptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokenizer = Tokenizer::create(testing::small_tokenizer_metadata());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
    tokenizer_ = std::make_unique<Tokenizer>(std::move(*tokenizer));
    context_.tokenizer = tokenizer_.get();
    context_.vocab_size = testing::small::kVocab;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  PromptContext context_;
};

TEST_F(ServerPromptTest, CompletionsTokenizeTheirPromptWithSpecialTokens) {
  auto result = to_generation_request(completion(""), context_);
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(result));
  const GenerationRequest& request = std::get<GenerationRequest>(result);
  EXPECT_EQ(request.prompt, (std::vector<uint32_t>{'h', 'i'}));
  EXPECT_EQ(request.max_tokens, kDefaultCompletionMaxTokens);
  EXPECT_FALSE(request.split_reasoning);
  auto special = to_generation_request(parsed(Endpoint::Completions, R"({"prompt": "<|im_start|>"})"), context_);
  EXPECT_EQ(std::get<GenerationRequest>(special).prompt, std::vector<uint32_t>{testing::small::kImStart});
  auto ids = to_generation_request(parsed(Endpoint::Completions, R"({"prompt": [1, 274]})"), context_);
  ASSERT_TRUE(std::holds_alternative<ApiError>(ids));
  EXPECT_EQ(std::get<ApiError>(ids).param, "prompt");
  auto bias = to_generation_request(completion(R"(, "logit_bias": {"9999": 1})"), context_);
  ASSERT_TRUE(std::holds_alternative<ApiError>(bias));
  EXPECT_EQ(std::get<ApiError>(bias).param, "logit_bias");
  auto empty = to_generation_request(parsed(Endpoint::Completions, R"({"prompt": ""})"), context_);
  ASSERT_TRUE(std::holds_alternative<ApiError>(empty));
}

TEST_F(ServerPromptTest, ChatOnABaseModelIsAClear400) {
  context_.chat_format_error = "no chat template";
  auto result = to_generation_request(chat(""), context_);
  ASSERT_TRUE(std::holds_alternative<ApiError>(result));
  const ApiError& error = std::get<ApiError>(result);
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.param, "messages");
  EXPECT_NE(error.message.find("/v1/completions"), std::string::npos);
}

TEST_F(ServerPromptTest, ToolsGoToTheTemplateAndTurnOnCallParsing) {
  const std::string tools = R"(, "tools": [{"type": "function", "function": {"name": "lookup"}}])";
  context_.chat_format = ChatFormat::ChatML;
  auto chatml = to_generation_request(chat(tools), context_);
  ASSERT_TRUE(std::holds_alternative<ApiError>(chatml));
  EXPECT_EQ(std::get<ApiError>(chatml).param, "tools");
  context_.chat_format = ChatFormat::Qwen3;
  const auto request = [&](const std::string& fields) {
    auto result = to_generation_request(chat(fields), context_);
    if (auto* error = std::get_if<ApiError>(&result)) ADD_FAILURE() << fields << ": " << error->message;
    return std::holds_alternative<GenerationRequest>(result) ? std::get<GenerationRequest>(result)
                                                             : GenerationRequest{};
  };
  const GenerationRequest plain = request("");
  EXPECT_FALSE(plain.parse_tool_calls);
  const GenerationRequest with_tools = request(tools);
  EXPECT_TRUE(with_tools.parse_tool_calls);
  EXPECT_EQ(with_tools.max_tool_calls, UINT32_MAX);
  EXPECT_GT(with_tools.prompt.size(), plain.prompt.size());  // the tools are in the system turn
  const std::string text = *tokenizer_->decode(with_tools.prompt);
  EXPECT_NE(text.find(R"("name": "lookup")"), std::string::npos) << text;
  EXPECT_EQ(request(tools + R"(, "parallel_tool_calls": false)").max_tool_calls, 1u);
  const GenerationRequest none = request(tools + R"(, "tool_choice": "none")");
  EXPECT_FALSE(none.parse_tool_calls);
  EXPECT_EQ(none.prompt, plain.prompt);  // tool_choice none: the tools are not shown
  // reasoning_effort none renders the empty think block, as enable_thinking false does.
  EXPECT_EQ(request(R"(, "reasoning_effort": "none")").prompt,
            request(R"(, "chat_template_kwargs": {"enable_thinking": false})").prompt);
  EXPECT_NE(request(R"(, "reasoning_effort": "none")").prompt, plain.prompt);
}

TEST_F(ServerPromptTest, ChatRendersWithTheModelsFormat) {
  context_.chat_format = ChatFormat::ChatML;
  auto result = to_generation_request(chat(R"(, "max_completion_tokens": 4)"), context_);
  ASSERT_TRUE(std::holds_alternative<GenerationRequest>(result));
  const GenerationRequest& request = std::get<GenerationRequest>(result);
  EXPECT_EQ(request.prompt.front(), testing::small::kImStart);
  EXPECT_EQ(request.max_tokens, 4u);
  EXPECT_FALSE(request.split_reasoning);  // only Qwen3's format thinks
}

}  // namespace
}  // namespace kipp::server
