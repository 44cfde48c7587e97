// Response shapes (src/server/openai_response.h), reasoning splitting (think_splitter.h), the
// Prometheus text (metrics.h) and the small security helpers of http_server.h.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_response.h"
#include "server/think_splitter.h"

namespace kipp::server {
namespace {

using json = nlohmann::json;

Event delta(uint32_t choice, std::string content, std::string reasoning = "", std::vector<TokenReport> tokens = {}) {
  Event event;
  event.choice = choice;
  event.content = std::move(content);
  event.reasoning = std::move(reasoning);
  event.tokens = std::move(tokens);
  return event;
}

Event finish(uint32_t choice, std::string reason) {
  Event event;
  event.kind = Event::Kind::Finish;
  event.choice = choice;
  event.finish_reason = std::move(reason);
  return event;
}

Usage usage() {
  Usage u;
  u.prompt_tokens = 10;
  u.completion_tokens = 4;
  u.cached_tokens = 6;
  u.prompt_ms = 20;
  u.generation_ms = 40;
  return u;
}

json parse_chunk(const std::string& chunk) {
  EXPECT_EQ(chunk.rfind("data: ", 0), 0u) << chunk;
  EXPECT_EQ(chunk.substr(chunk.size() - 2), "\n\n");
  return json::parse(chunk.substr(6, chunk.size() - 8));
}

TEST(ServerResponse, ChatCompletionHasOpenAIsFieldsAndTimings) {
  ResponseBuilder builder(make_identity(Endpoint::ChatCompletions, "tiny", "fp"), 2, false);
  builder.add(delta(1, "B"));
  builder.add(delta(0, "an", "think"));
  builder.add(delta(0, "swer"));
  builder.add(finish(0, "stop"));
  builder.add(finish(1, "length"));
  const json out = builder.finish(usage());
  EXPECT_EQ(out["object"], "chat.completion");
  EXPECT_EQ(out["model"], "tiny");
  EXPECT_EQ(out["system_fingerprint"], "fp");
  EXPECT_EQ(out["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_TRUE(out["created"].is_number_integer());
  ASSERT_EQ(out["choices"].size(), 2u);
  EXPECT_EQ(out["choices"][0]["index"], 0);
  EXPECT_EQ(out["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(out["choices"][0]["message"]["content"], "answer");
  EXPECT_EQ(out["choices"][0]["message"]["reasoning_content"], "think");
  EXPECT_FALSE(out["choices"][1]["message"].contains("reasoning_content"));
  EXPECT_EQ(out["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(out["choices"][1]["finish_reason"], "length");
  EXPECT_TRUE(out["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(out["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(out["usage"]["completion_tokens"], 4);
  EXPECT_EQ(out["usage"]["total_tokens"], 14);
  EXPECT_EQ(out["usage"]["prompt_tokens_details"]["cached_tokens"], 6);
  EXPECT_EQ(out["timings"]["prompt_n"], 4);
  EXPECT_EQ(out["timings"]["cache_n"], 6);
  EXPECT_DOUBLE_EQ(out["timings"]["predicted_per_second"].get<double>(), 100.0);
}

TEST(ServerResponse, CompletionLogprobsAreTheLegacyParallelLists) {
  ResponseBuilder builder(make_identity(Endpoint::Completions, "tiny", "fp"), 1, true);
  builder.add(delta(0, "ab", "", {{"a", -0.5f, {{"a", -0.5f}, {"x", -1.5f}}}, {"b", -0.25f, {}}}));
  builder.add(finish(0, "length"));
  const json out = builder.finish(usage());
  EXPECT_EQ(out["object"], "text_completion");
  EXPECT_EQ(out["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  const json& choice = out["choices"][0];
  EXPECT_EQ(choice["text"], "ab");
  EXPECT_EQ(choice["logprobs"]["tokens"], json({"a", "b"}));
  EXPECT_EQ(choice["logprobs"]["token_logprobs"], json({-0.5, -0.25}));
  EXPECT_EQ(choice["logprobs"]["top_logprobs"][0]["x"], -1.5);
  EXPECT_EQ(choice["logprobs"]["text_offset"], json({0, 1}));
}

TEST(ServerResponse, ChatLogprobsCarryBytesAndSurviveBrokenUtf8) {
  ResponseBuilder builder(make_identity(Endpoint::ChatCompletions, "tiny", "fp"), 1, true);
  builder.add(delta(0, "", "", {{"\xf0\x9f", -1.0f, {{"\xf0\x9f", -1.0f}}}}));
  const std::string text = dump(builder.finish(usage()));
  const json out = json::parse(text);  // valid JSON: the half character became U+FFFD
  const json& token = out["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(token["bytes"], json({0xf0, 0x9f}));
  EXPECT_EQ(token["logprob"], -1.0);
  EXPECT_EQ(token["top_logprobs"].size(), 1u);
  EXPECT_TRUE(out["choices"][0]["finish_reason"].is_null());
}

TEST(ServerResponse, ChatChunksCarryTheRoleOnceAndTheirIndex) {
  ChunkWriter writer(make_identity(Endpoint::ChatCompletions, "tiny", "fp"), 2, false);
  const json first = parse_chunk(writer.delta(delta(1, "x")));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["index"], 1);
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "x");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const json second = parse_chunk(writer.delta(delta(1, "", "why")));
  EXPECT_FALSE(second["choices"][0]["delta"].contains("role"));
  EXPECT_FALSE(second["choices"][0]["delta"].contains("content"));
  EXPECT_EQ(second["choices"][0]["delta"]["reasoning_content"], "why");
  const json done = parse_chunk(writer.finish(finish(0, "stop")));
  EXPECT_EQ(done["choices"][0]["delta"]["role"], "assistant");  // choice 0 had sent nothing yet
  EXPECT_EQ(done["choices"][0]["finish_reason"], "stop");
  const json tail = parse_chunk(writer.usage(usage()));
  EXPECT_TRUE(tail["choices"].is_array() && tail["choices"].empty());
  EXPECT_EQ(tail["usage"]["total_tokens"], 14);
  EXPECT_EQ(ChunkWriter::done(), "data: [DONE]\n\n");
}

Event call_delta(uint32_t choice, uint32_t index, std::string id, std::string name, std::string arguments) {
  Event event;
  event.choice = choice;
  event.tool_call_index = index;
  event.tool_call_id = std::move(id);
  event.tool_call_name = std::move(name);
  event.tool_call_arguments = std::move(arguments);
  return event;
}

TEST(ServerResponse, ToolCallsInAWholeChatResponse) {
  ResponseBuilder builder(make_identity(Endpoint::ChatCompletions, "tiny", "fp"), 2, false);
  builder.add(call_delta(0, 0, "call_1", "get_weather", "{\"city\""));
  builder.add(call_delta(0, 0, "", "", ": \"Paris\"}"));
  builder.add(call_delta(0, 1, "call_2", "now", ""));
  builder.add(call_delta(0, 1, "", "", "{}"));
  builder.add(finish(0, "tool_calls"));
  builder.add(delta(1, "Let me see."));
  builder.add(call_delta(1, 0, "call_3", "now", "{}"));
  builder.add(finish(1, "tool_calls"));
  const json out = builder.finish(usage());
  const json& first = out["choices"][0];
  EXPECT_EQ(first["finish_reason"], "tool_calls");
  EXPECT_TRUE(first["message"]["content"].is_null());  // no text, only calls
  EXPECT_EQ(first["message"]["tool_calls"],
            json::parse(R"([{"id": "call_1", "type": "function", "function": {"name": "get_weather",
                              "arguments": "{\"city\": \"Paris\"}"}},
                            {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": "{}"}}])"));
  EXPECT_EQ(out["choices"][1]["message"]["content"], "Let me see.");
  EXPECT_EQ(out["choices"][1]["message"]["tool_calls"].size(), 1u);
  // Without calls there is no tool_calls key and content stays a string.
  ResponseBuilder plain(make_identity(Endpoint::ChatCompletions, "tiny", "fp"), 1, false);
  plain.add(finish(0, "stop"));
  const json message = plain.finish(usage())["choices"][0]["message"];
  EXPECT_FALSE(message.contains("tool_calls"));
  EXPECT_EQ(message["content"], "");
}

TEST(ServerResponse, ToolCallChunksNameTheCallFirstThenItsArguments) {
  ChunkWriter writer(make_identity(Endpoint::ChatCompletions, "tiny", "fp"), 1, false);
  const json first = parse_chunk(writer.delta(call_delta(0, 0, "call_1", "f", "{\"a\"")));
  const json& d1 = first["choices"][0]["delta"];
  EXPECT_EQ(d1["role"], "assistant");
  EXPECT_FALSE(d1.contains("content"));
  EXPECT_EQ(d1["tool_calls"], json::parse(R"([{"index": 0, "id": "call_1", "type": "function",
                                                 "function": {"name": "f", "arguments": "{\"a\""}}])"));
  const json next = parse_chunk(writer.delta(call_delta(0, 0, "", "", ": 1}")));
  EXPECT_EQ(next["choices"][0]["delta"],
            json::parse(R"({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]})"));
  const json second = parse_chunk(writer.delta(call_delta(0, 1, "call_2", "g", "")));
  EXPECT_EQ(second["choices"][0]["delta"]["tool_calls"][0]["index"], 1);
  EXPECT_EQ(second["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "g");
  const json end = parse_chunk(writer.finish(finish(0, "tool_calls")));
  EXPECT_EQ(end["choices"][0]["finish_reason"], "tool_calls");
}

TEST(ServerResponse, ReasoningFieldChoosesTheName) {
  for (ReasoningField field : {ReasoningField::ReasoningContent, ReasoningField::Reasoning, ReasoningField::Both}) {
    ResponseIdentity identity = make_identity(Endpoint::ChatCompletions, "tiny", "fp");
    identity.reasoning_field = field;
    ResponseBuilder builder(identity, 1, false);
    builder.add(delta(0, "a", "why"));
    const json message = builder.finish(usage())["choices"][0]["message"];
    ChunkWriter writer(identity, 1, false);
    const json chunk = parse_chunk(writer.delta(delta(0, "", "why")))["choices"][0]["delta"];
    const bool content_field = field != ReasoningField::Reasoning;
    const bool reasoning_field = field != ReasoningField::ReasoningContent;
    for (const json& shown : {message, chunk}) {
      EXPECT_EQ(shown.contains("reasoning_content"), content_field) << shown;
      EXPECT_EQ(shown.contains("reasoning"), reasoning_field) << shown;
      if (content_field) {
        EXPECT_EQ(shown["reasoning_content"], "why");
      }
      if (reasoning_field) {
        EXPECT_EQ(shown["reasoning"], "why");
      }
    }
  }
}

TEST(ServerResponse, CompletionChunksAndErrors) {
  ChunkWriter writer(make_identity(Endpoint::Completions, "tiny", "fp"), 1, true);
  const json first = parse_chunk(writer.delta(delta(0, "ab", "", {{"a", -1, {}}, {"b", -2, {}}})));
  EXPECT_EQ(first["object"], "text_completion");
  EXPECT_EQ(first["choices"][0]["text"], "ab");
  const json second = parse_chunk(writer.delta(delta(0, "c", "", {{"c", -1, {}}})));
  EXPECT_EQ(second["choices"][0]["logprobs"]["text_offset"], json({2}));  // offsets run on across chunks
  ApiError error;
  error.status = 500;
  error.message = "boom";
  error.type = "server_error";
  const json shaped = parse_chunk(ChunkWriter::error(error));
  EXPECT_EQ(shaped["error"]["message"], "boom");
  EXPECT_EQ(shaped["error"]["type"], "server_error");
  EXPECT_TRUE(shaped["error"]["param"].is_null());
  EXPECT_TRUE(shaped["error"]["code"].is_null());
}

std::pair<std::string, std::string> split_all(const std::vector<std::string>& pieces) {
  ThinkSplitter splitter;
  std::string reasoning, content;
  for (const std::string& piece : pieces) {
    auto out = splitter.push(piece);
    reasoning += out.reasoning;
    content += out.content;
  }
  auto out = splitter.finish();
  return {reasoning + out.reasoning, content + out.content};
}

TEST(ServerThinkSplitter, SplitsALeadingThinkBlockInAnyPieces) {
  const std::string text = "<think>\nstep one\nstep two\n</think>\n\nThe answer.";
  const std::pair<std::string, std::string> expected{"step one\nstep two", "The answer."};
  EXPECT_EQ(split_all({text}), expected);
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  EXPECT_EQ(split_all(bytes), expected);
  EXPECT_EQ(split_all({"<thi", "nk>a</th", "ink>b"}), (std::pair<std::string, std::string>{"a", "b"}));
}

TEST(ServerThinkSplitter, OnlyALeadingBlockIsReasoning) {
  EXPECT_EQ(split_all({"Hello <think>x</think>"}), (std::pair<std::string, std::string>{"", "Hello <think>x</think>"}));
  EXPECT_EQ(split_all({"<thin"}), (std::pair<std::string, std::string>{"", "<thin"}));
  EXPECT_EQ(split_all({"<think>unfinished\n"}), (std::pair<std::string, std::string>{"unfinished\n", ""}));
  EXPECT_EQ(split_all({"plain"}), (std::pair<std::string, std::string>{"", "plain"}));
}

TEST(ServerMetrics, PrometheusText) {
  Metrics metrics;
  metrics.count_request("/v1/completions", 200);
  metrics.count_request("/v1/completions", 200);
  metrics.count_request("/health", 404);
  metrics.add_tokens(12, 5);
  metrics.add_prefix_reuse(64);
  metrics.observe_time_to_first_token(0.2);
  metrics.observe_request_duration(3);
  metrics.count_cancelled();
  metrics.count_cancelled();
  SchedulerGauges gauges;
  gauges.queue_depth = 2;
  gauges.batch_occupancy = 3;
  gauges.batch_capacity = 16;
  gauges.kv_blocks_used = 7;
  gauges.kv_blocks_total = 100;
  metrics.set_gauges(gauges);
  const std::string text = metrics.render();
  for (const char* line :
       {"kipp_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2\n",
        "kipp_requests_total{endpoint=\"/health\",status=\"404\"} 1\n", "kipp_prompt_tokens_total 12\n",
        "kipp_generated_tokens_total 5\n", "kipp_requests_cancelled_total 2\n", "kipp_queue_depth 2\n",
        "kipp_batch_occupancy 3\n", "kipp_batch_capacity 16\n", "kipp_kv_pool_blocks_used 7\n",
        "kipp_kv_pool_blocks_total 100\n", "kipp_prefix_reuse_hits_total 1\n", "kipp_prefix_cached_tokens_total 64\n",
        "kipp_time_to_first_token_seconds_bucket{le=\"0.25\"} 1\n",
        "kipp_time_to_first_token_seconds_bucket{le=\"0.1\"} 0\n",
        "kipp_request_duration_seconds_bucket{le=\"+Inf\"} 1\n", "kipp_request_duration_seconds_count 1\n",
        "# TYPE kipp_request_duration_seconds histogram\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line;
}

TEST(ServerSecurity, LoopbackAndKeyComparison) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "127.255.255.255", "localhost", "LocalHost", "::1", "[::1]"})
    EXPECT_TRUE(is_loopback_host(host)) << host;
  for (const char* host : {"0.0.0.0", "::", "192.168.1.2", "example.com", "127.0.0.1.evil.com", "127.evil.com",
                           "127.0.0", "127.0.0.1.5", "127.0.0.256", "127.0.0.-1", "127..0.1", "127.0.0.1 ",
                           "0127.0.0.1", "127.0.0.1:80", "localhost.evil.com", "[::1]x", ""})
    EXPECT_FALSE(is_loopback_host(host)) << host;
  EXPECT_TRUE(constant_time_equal("secret", "secret"));
  EXPECT_FALSE(constant_time_equal("secret", "secreT"));
  EXPECT_FALSE(constant_time_equal("secret", "secret2"));
  EXPECT_FALSE(constant_time_equal("", "x"));
}

TEST(ServerSecurity, HostHeaderOfALoopbackBindNamesThisMachineOnly) {
  for (const char* bound : {"127.0.0.1", "localhost", "::1"}) {
    for (const char* host : {"127.0.0.1", "127.0.0.1:8080", "127.9.8.7:1", "localhost", "localhost:8080",
                             "LOCALHOST:8080", "[::1]", "[::1]:8080"})
      EXPECT_TRUE(host_header_allowed(host, bound)) << bound << " / " << host;
    for (const char* host : {"127.0.0.1.evil.com",
                             "127.0.0.1.evil.com:8080",
                             "127.evil.com",
                             "localhost.evil.com:8080",
                             "evil.com",
                             "evil.com:8080",
                             "localhost:",
                             "localhost:80x",
                             "localhost:123456",
                             "localhost:8080:1",
                             "127.0.0.1:8080@evil.com",
                             "127.0.0.1 evil.com",
                             "::1",
                             "[::1",
                             "[::1]evil",
                             "[::1]:x",
                             "[]",
                             "[::2]:8080",
                             "192.168.1.2:8080",
                             "0.0.0.0",
                             "",
                             ":8080",
                             "127.0.0.1.",
                             "127.0.0.300"})
      EXPECT_FALSE(host_header_allowed(host, bound)) << bound << " / " << host;
  }
}

TEST(ServerSecurity, HostHeaderOfAnExposedBindNamesItOrLoopback) {
  for (const char* host : {"192.168.1.2", "192.168.1.2:8080", "localhost:8080", "127.0.0.1"})
    EXPECT_TRUE(host_header_allowed(host, "192.168.1.2")) << host;
  for (const char* host :
       {"192.168.1.2.evil.com", "192.168.1.20", "evil.com:8080", "192.168.1.2:80x", "[192.168.1.2]x"})
    EXPECT_FALSE(host_header_allowed(host, "192.168.1.2")) << host;
  EXPECT_TRUE(host_header_allowed("MyBox.lan:8080", "mybox.lan"));
  EXPECT_FALSE(host_header_allowed("mybox.lan.evil.com", "mybox.lan"));
  EXPECT_TRUE(host_header_allowed("[fd00::5]:8080", "fd00::5"));
  EXPECT_TRUE(host_header_allowed("[FD00::5]", "[fd00::5]"));
  EXPECT_FALSE(host_header_allowed("fd00::5", "fd00::5"));
  EXPECT_FALSE(host_header_allowed("[fd00::6]", "fd00::5"));
  // A wildcard bind accepts any Host (the API key protects it).
  EXPECT_TRUE(host_header_allowed("anything.example:1", "0.0.0.0"));
  EXPECT_TRUE(host_header_allowed("anything.example", "::"));
}

}  // namespace
}  // namespace kipp::server
