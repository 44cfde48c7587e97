// The Responses API (src/server/responses_api.h): input items and fields mapped onto the chat
// request, errors naming the Responses params, and the output items and SSE events; the streamed
// events are replayed the way the official client accumulates them and must rebuild the final
// response's output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "server/responses_api.h"

namespace kipp::server {
namespace {

using json = nlohmann::ordered_json;

// Equal as JSON values (key order aside, as clients read them).
bool same(const json& a, const json& b) { return nlohmann::json::parse(a.dump()) == nlohmann::json::parse(b.dump()); }

ResponsesRequest mapped(const std::string& body) {
  auto result = parse_responses_request(body);
  if (auto* error = std::get_if<ApiError>(&result)) ADD_FAILURE() << body << ": " << error->message;
  return std::holds_alternative<ResponsesRequest>(result) ? std::get<ResponsesRequest>(result) : ResponsesRequest{};
}

std::string refused_param(const std::string& body) {
  auto result = parse_responses_request(body);
  EXPECT_TRUE(std::holds_alternative<ApiError>(result)) << body << " was accepted";
  if (!std::holds_alternative<ApiError>(result)) return "";
  EXPECT_EQ(std::get<ApiError>(result).status, 400);
  return std::get<ApiError>(result).param;
}

TEST(ServerResponsesApi, AStringInputWithInstructions) {
  const ResponsesRequest r = mapped(R"({"model": "m", "input": "Hi", "instructions": "Be brief",
      "max_output_tokens": 7, "temperature": 0.5, "top_p": 0.9, "stream": true, "store": false,
      "metadata": {"a": "b"}, "include": ["reasoning.encrypted_content"], "user": "u", "truncation": "disabled"})");
  const OpenAiRequest& chat = r.chat;
  EXPECT_EQ(chat.endpoint, Endpoint::ChatCompletions);
  EXPECT_EQ(chat.model, "m");
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[0].content, "Be brief");
  EXPECT_EQ(chat.messages[1].role, "user");
  EXPECT_EQ(chat.messages[1].content, "Hi");
  EXPECT_EQ(chat.max_tokens, 7u);
  EXPECT_EQ(chat.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(chat.sampling.top_p, 0.9f);
  EXPECT_TRUE(chat.stream);
  EXPECT_EQ(chat.n, 1u);
  EXPECT_EQ(r.echo["instructions"], "Be brief");
  EXPECT_EQ(r.echo["max_output_tokens"], 7);
  EXPECT_EQ(r.echo["metadata"], (json{{"a", "b"}}));
  EXPECT_EQ(r.echo["tool_choice"], "auto");
  EXPECT_EQ(r.echo["text"]["format"]["type"], "text");
}

TEST(ServerResponsesApi, InputItemsBecomeChatTurns) {
  const ResponsesRequest r = mapped(R"({"input": [
      {"role": "developer", "content": "rules"},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "hmm"}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
      {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "w", "arguments": "{\"c\":1}", "status": "completed"},
      {"type": "function_call", "call_id": "call_2", "name": "v", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
      {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "rain"}]},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "short"}]},
      {"type": "function_call", "call_id": "call_3", "name": "w", "arguments": "{}"},
      {"role": "user", "content": "thanks"}]})");
  const std::vector<ChatMessage>& m = r.chat.messages;
  ASSERT_EQ(m.size(), 7u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[1].content, "a\nb");
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].content, "Let me look.");
  EXPECT_EQ(m[2].reasoning_content, "hmm");
  ASSERT_EQ(m[2].tool_calls.size(), 2u);  // one turn's calls are one message
  EXPECT_EQ(m[2].tool_calls[0].id, "call_1");
  EXPECT_EQ(m[2].tool_calls[0].name, "w");
  EXPECT_EQ(m[2].tool_calls[0].arguments, R"({"c":1})");
  EXPECT_EQ(m[2].tool_calls[1].id, "call_2");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].content, "sunny");
  EXPECT_EQ(m[4].content, "rain");
  EXPECT_EQ(m[5].role, "assistant");
  EXPECT_EQ(m[5].reasoning_content, "short");
  ASSERT_EQ(m[5].tool_calls.size(), 1u);
  EXPECT_EQ(m[6].content, "thanks");
}

TEST(ServerResponsesApi, ToolsTextFormatAndReasoning) {
  const ResponsesRequest r = mapped(R"({"input": "x",
      "tools": [{"type": "function", "name": "get_weather", "description": "W",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": true}],
      "tool_choice": {"type": "function", "name": "get_weather"}, "parallel_tool_calls": false,
      "reasoning": {"effort": "minimal", "summary": "auto"}})");
  ASSERT_EQ(r.chat.tools.size(), 1u);
  EXPECT_EQ(r.chat.tools[0].json,
            R"({"type":"function","function":{"name":"get_weather","description":"W","parameters":{"type":"object",)"
            R"("properties":{"city":{"type":"string"}}},"strict":true}})");
  EXPECT_TRUE(r.chat.tools[0].strict);
  EXPECT_EQ(r.chat.tool_choice, ToolChoice::Named);
  EXPECT_EQ(r.chat.tool_choice_name, "get_weather");
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_FALSE(r.chat.enable_thinking);
  EXPECT_EQ(r.echo["tools"][0]["name"], "get_weather");
  EXPECT_EQ(r.echo["reasoning"]["effort"], "minimal");
  EXPECT_EQ(r.echo["parallel_tool_calls"], false);

  const ResponsesRequest schema = mapped(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n",
      "schema": {"type": "object"}, "strict": true}, "verbosity": "low"}})");
  EXPECT_EQ(schema.chat.constraint.kind, OutputConstraint::Kind::JsonSchema);
  EXPECT_EQ(schema.chat.constraint.text, R"({"type":"object"})");
  EXPECT_EQ(schema.chat.constraint.name, "n");
  EXPECT_EQ(schema.echo["text"]["format"]["name"], "n");
  EXPECT_EQ(mapped(R"({"input": "x", "text": {"format": {"type": "json_object"}}})").chat.constraint.kind,
            OutputConstraint::Kind::JsonObject);
}

TEST(ServerResponsesApi, ErrorsNameTheResponsesParams) {
  EXPECT_EQ(refused_param(R"({"instructions": "x"})"), "input");
  EXPECT_EQ(refused_param(R"({"input": 3})"), "input");
  EXPECT_EQ(refused_param(R"({"input": []})"), "input");
  EXPECT_EQ(refused_param(R"({"input": "x", "previous_response_id": "resp_1"})"), "previous_response_id");
  EXPECT_EQ(refused_param(R"({"input": "x", "conversation": "conv_1"})"), "conversation");
  EXPECT_EQ(refused_param(R"({"input": "x", "background": true})"), "background");
  EXPECT_EQ(refused_param(R"({"input": "x", "truncation": "auto"})"), "truncation");
  EXPECT_EQ(refused_param(R"({"input": "x", "n": 2})"), "n");
  EXPECT_EQ(refused_param(R"({"input": "x", "max_output_tokens": 0})"), "max_output_tokens");
  EXPECT_EQ(refused_param(R"({"input": "x", "temperature": 3})"), "temperature");
  EXPECT_EQ(refused_param(R"({"input": "x", "reasoning": {"effort": "max"}})"), "reasoning.effort");
  EXPECT_EQ(refused_param(R"({"input": "x", "reasoning": {"other": 1}})"), "reasoning.other");
  EXPECT_EQ(refused_param(R"({"input": "x", "text": {"format": {"type": "xml"}}})"), "text.format.type");
  EXPECT_EQ(refused_param(R"({"input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}})"),
            "text.format.name");
  EXPECT_EQ(refused_param(R"({"input": "x", "tools": [{"type": "web_search"}]})"), "tools[0].type");
  EXPECT_EQ(refused_param(R"({"input": "x", "tools": [{"type": "function", "name": "a b"}]})"), "tools[0].name");
  EXPECT_EQ(refused_param(R"({"input": "x", "tools": [{"type": "function", "name": "f"}],
                              "tool_choice": {"type": "function", "name": "g"}})"),
            "tool_choice");
  EXPECT_EQ(refused_param(R"({"input": [{"type": "item_reference", "id": "x"}]})"), "input[0].type");
  EXPECT_EQ(refused_param(R"({"input": [{"role": "tool", "content": "x"}]})"), "input[0].role");
  EXPECT_EQ(refused_param(R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})"),
            "input[0].content[0]");
  EXPECT_EQ(refused_param(R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})"),
            "input[0].call_id");
  EXPECT_EQ(refused_param(R"({"input": [{"type": "function_call_output", "call_id": "c"}]})"), "input[0].output");
  EXPECT_EQ(refused_param("{"), "");
  // Errors found later (prompt, context) name the Responses params too.
  ApiError late;
  for (const auto& [chat, responses] : {std::pair{"messages", "input"},
                                        {"max_tokens", "max_output_tokens"},
                                        {"tools[3].function.parameters", "tools[3].parameters"},
                                        {"seed", "seed"}}) {
    late.param = chat;
    EXPECT_EQ(with_responses_params(late).param, responses);
  }
}

Event delta(std::string content, std::string reasoning = "") {
  Event event;
  event.content = std::move(content);
  event.reasoning = std::move(reasoning);
  return event;
}

Event call_delta(uint32_t index, std::string id, std::string name, std::string arguments) {
  Event event;
  event.tool_call_index = index;
  event.tool_call_id = std::move(id);
  event.tool_call_name = std::move(name);
  event.tool_call_arguments = std::move(arguments);
  return event;
}

Event finish(std::string reason) {
  Event event;
  event.kind = Event::Kind::Finish;
  event.finish_reason = std::move(reason);
  return event;
}

Usage usage() {
  Usage u;
  u.prompt_tokens = 12;
  u.completion_tokens = 5;
  u.cached_tokens = 3;
  return u;
}

ResponseIdentity identity() {
  ResponseIdentity id = make_identity(Endpoint::ChatCompletions, "tiny", "fp");
  id.id = "resp_1";
  return id;
}

// Feeds the events to a writer; returns its SSE text (streaming) and the final response.
std::pair<std::string, json> run(const std::vector<Event>& events, bool stream, const Usage& u = usage()) {
  ResponsesWriter writer(identity(), json{{"tools", json::array()}}, stream);
  std::string sse = writer.start();
  for (const Event& event : events) sse += writer.add(event);
  sse += writer.done(u);
  return {sse, writer.response()};
}

const std::vector<Event> kToolTurn = {delta("", "I should "),
                                      delta("", "look"),
                                      delta("Checking"),
                                      delta("."),
                                      call_delta(0, "call_a", "w", "{\"c\""),
                                      call_delta(0, "", "", ":1}"),
                                      call_delta(1, "call_b", "v", "{}"),
                                      finish("tool_calls")};

TEST(ServerResponsesApi, OutputItemsOfAToolTurn) {
  const json r = run(kToolTurn, false).second;
  EXPECT_EQ(r["id"], "resp_1");
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_TRUE(r["incomplete_details"].is_null());
  EXPECT_EQ(r["model"], "tiny");
  const json& out = r["output"];
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0]["type"], "reasoning");
  EXPECT_EQ(out[0]["summary"], json::array());
  EXPECT_EQ(out[0]["content"][0], (json{{"type", "reasoning_text"}, {"text", "I should look"}}));
  EXPECT_EQ(out[1]["type"], "message");
  EXPECT_EQ(out[1]["role"], "assistant");
  EXPECT_EQ(out[1]["status"], "completed");
  EXPECT_EQ(out[1]["content"][0]["type"], "output_text");
  EXPECT_EQ(out[1]["content"][0]["text"], "Checking.");
  EXPECT_EQ(out[1]["content"][0]["annotations"], json::array());
  EXPECT_EQ(out[2]["type"], "function_call");
  EXPECT_EQ(out[2]["call_id"], "call_a");
  EXPECT_EQ(out[2]["name"], "w");
  EXPECT_EQ(out[2]["arguments"], "{\"c\":1}");
  EXPECT_EQ(out[2]["status"], "completed");
  EXPECT_EQ(out[3]["call_id"], "call_b");
  EXPECT_EQ(out[3]["arguments"], "{}");
  EXPECT_EQ(out[0]["id"].get<std::string>().rfind("rs_", 0), 0u);
  EXPECT_EQ(out[1]["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(out[2]["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_NE(out[2]["id"], out[3]["id"]);
  EXPECT_EQ(r["usage"], (json{{"input_tokens", 12},
                              {"input_tokens_details", {{"cached_tokens", 3}}},
                              {"output_tokens", 5},
                              {"output_tokens_details", {{"reasoning_tokens", 0}}},
                              {"total_tokens", 17}}));
  EXPECT_EQ(r["tools"], json::array());  // the echo
}

TEST(ServerResponsesApi, LengthIsIncompleteAndSilenceIsAnEmptyMessage) {
  const json cut = run({delta("abc"), finish("length")}, false).second;
  EXPECT_EQ(cut["status"], "incomplete");
  EXPECT_EQ(cut["incomplete_details"], (json{{"reason", "max_output_tokens"}}));
  EXPECT_EQ(cut["output"][0]["status"], "incomplete");
  const json empty = run({finish("stop")}, false).second;
  ASSERT_EQ(empty["output"].size(), 1u);
  EXPECT_EQ(empty["output"][0]["type"], "message");
  EXPECT_EQ(empty["output"][0]["content"][0]["text"], "");
}

// The SSE text as (event line, data) pairs.
std::vector<std::pair<std::string, json>> parse_sse(const std::string& text) {
  std::vector<std::pair<std::string, json>> events;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an event without its blank line";
    if (end == std::string::npos) break;
    const std::string block = text.substr(at, end - at);
    at = end + 2;
    const size_t newline = block.find('\n');
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    EXPECT_EQ(block.compare(newline + 1, 6, "data: "), 0) << block;
    events.emplace_back(block.substr(7, newline - 7), json::parse(block.substr(newline + 7)));
  }
  return events;
}

TEST(ServerResponsesApi, StreamedEventsRebuildTheResponse) {
  const auto [sse, final_response] = run(kToolTurn, true);
  const auto events = parse_sse(sse);
  ASSERT_GE(events.size(), 3u);
  // The client's accumulation: created gives the snapshot, items and parts are pushed, deltas
  // appended, done events replace.
  json snapshot;
  std::vector<std::string> types;
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& [name, data] = events[i];
    EXPECT_EQ(data["type"], name);
    EXPECT_EQ(data["sequence_number"], i);
    const std::string type = name;
    types.push_back(type);
    if (type == "response.created") {
      snapshot = data["response"];
      EXPECT_EQ(snapshot["status"], "in_progress");
      EXPECT_EQ(snapshot["output"], json::array());
      continue;
    }
    ASSERT_FALSE(snapshot.is_null()) << "first event " << type;
    if (type == "response.output_item.added") {
      EXPECT_EQ(data["output_index"], snapshot["output"].size());
      snapshot["output"].push_back(data["item"]);
      continue;
    }
    if (type == "response.completed") {
      snapshot["status"] = data["response"]["status"];
      EXPECT_TRUE(same(data["response"], final_response));
      continue;
    }
    if (type == "response.in_progress") continue;
    json& item = snapshot["output"].at(data["output_index"].get<size_t>());
    if (data.contains("item_id")) {
      EXPECT_EQ(data["item_id"], item["id"]) << type;
    }
    if (type == "response.content_part.added") {
      if (!item.contains("content")) item["content"] = json::array();
      EXPECT_EQ(data["content_index"], item["content"].size());
      item["content"].push_back(data["part"]);
    } else if (type == "response.output_text.delta" || type == "response.reasoning_text.delta") {
      item["content"].at(data["content_index"].get<size_t>())["text"] =
          item["content"][data["content_index"].get<size_t>()]["text"].get<std::string>() +
          data["delta"].get<std::string>();
    } else if (type == "response.function_call_arguments.delta") {
      item["arguments"] = item["arguments"].get<std::string>() + data["delta"].get<std::string>();
    } else if (type == "response.output_text.done" || type == "response.reasoning_text.done") {
      EXPECT_EQ(item["content"][data["content_index"].get<size_t>()]["text"], data["text"]) << type;
    } else if (type == "response.function_call_arguments.done") {
      EXPECT_EQ(item["arguments"], data["arguments"]);
      EXPECT_EQ(item["name"], data["name"]);
    } else if (type == "response.content_part.done") {
      EXPECT_TRUE(same(item["content"][data["content_index"].get<size_t>()], data["part"])) << data;
    } else if (type == "response.output_item.done") {
      json expected = item;
      expected["status"] = data["item"]["status"];
      EXPECT_TRUE(same(data["item"], expected)) << data["item"] << " vs " << expected;
      item = data["item"];
    } else {
      ADD_FAILURE() << "unexpected event " << type;
    }
  }
  EXPECT_EQ(types.front(), "response.created");
  EXPECT_EQ(types[1], "response.in_progress");
  EXPECT_EQ(types.back(), "response.completed");
  EXPECT_TRUE(same(snapshot["output"], final_response["output"]));
  for (const char* needed : {"response.reasoning_text.delta", "response.output_text.delta",
                             "response.function_call_arguments.delta", "response.function_call_arguments.done"})
    EXPECT_NE(std::find(types.begin(), types.end(), needed), types.end()) << needed;
  // Not streaming: no SSE text at all.
  EXPECT_EQ(run(kToolTurn, false).first, "");
}

TEST(ServerResponsesApi, ErrorEvent) {
  ResponsesWriter writer(identity(), json::object(), true);
  writer.start();
  ApiError error;
  error.status = 504;
  error.message = "too slow";
  error.type = "timeout";
  error.code = "generation_timeout";
  const auto events = parse_sse(writer.error(error));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].first, "error");
  EXPECT_EQ(events[0].second["sequence_number"], 2);
  EXPECT_EQ(events[0].second["message"], "too slow");
  EXPECT_EQ(events[0].second["code"], "generation_timeout");
  EXPECT_TRUE(events[0].second["param"].is_null());
  EXPECT_EQ(events[0].second["error"]["type"], "timeout");
}

}  // namespace
}  // namespace kipp::server
