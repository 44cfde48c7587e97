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
       {R"(, "tools": [{"type": "function", "function": {"name": "f"}}])", R"(, "tool_choice": "required")",
        R"(, "response_format": {"type": "json_object"})", R"(, "functions": [{"name": "f"}])",
        R"(, "logits_processors": ["x"])", R"(, "reasoning_effort": "low")", R"(, "min_tokens": 3)"}) {
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
            "messages[1].tool_calls");
  RequestLimits limits;
  limits.max_messages = 2;
  auto many = parse_openai_request(Endpoint::ChatCompletions,
                                   R"({"messages": [{"role": "user", "content": "1"}, {"role": "user", "content": "2"},
                                                    {"role": "user", "content": "3"}]})",
                                   limits);
  ASSERT_TRUE(std::holds_alternative<ApiError>(many));
  EXPECT_EQ(std::get<ApiError>(many).param, "messages");
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
