#include "data/json_records.h"

#include <nlohmann/json.hpp>

#include "data/file_stream.h"
#include "tokenizer/utf8.h"

namespace kipp::data {
namespace {

// Ordered: tool definitions and tool-call arguments render with their keys in the order given.
using json = nlohmann::ordered_json;

// More values than this in one record (commas and colons outside strings) is malformed: the
// parsed tree costs tens of bytes per value, so a 64 MiB line of "1,1,1,..." must not be built.
constexpr size_t kMaxJsonValues = size_t{1} << 20;

// Follows JSON text byte by byte to tell bytes inside strings (where brackets and commas mean
// nothing) from structural ones.
class JsonStringTracker {
 public:
  // True when `c` lies outside every string and is not a quote opening or closing one.
  bool structural(char c) {
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      return false;
    }
    if (c == '"') {
      in_string_ = true;
      return false;
    }
    return true;
  }

 private:
  bool in_string_ = false, escape_ = false;
};

// What makes `text` unsafe to hand to the parser (nesting over kMaxJsonDepth, too many values),
// or empty. String- and escape-aware, one pass.
std::string json_shape_problem(std::string_view text) {
  int depth = 0;
  size_t values = 0;
  JsonStringTracker strings;
  for (const char c : text) {
    if (!strings.structural(c)) continue;
    if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) return "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
    } else if (c == '}' || c == ']') {
      if (depth > 0) --depth;
    } else if (c == ',' || c == ':') {
      if (++values > kMaxJsonValues)
        return "more than " + std::to_string(kMaxJsonValues) + " JSON values in one record";
    }
  }
  return {};
}

// The JSON text of each record: a JSONL line, or an element of a top-level array.
class JsonTextStream {
 public:
  Status open(const std::string& path) {
    KIPP_RETURN_IF_ERROR(stream_.open(path));
    KIPP_ASSIGN_OR_RETURN(int first, skip_whitespace());
    if (first == '[') {
      array_ = true;
      stream_.consume(1);
    }
    return {};
  }

  // The next record's text, with the line and byte offset where it starts; false at the end.
  // `malformed` is set instead when the text is unusable (too long, truncated, stray bytes).
  Expected<bool> next(std::string& text, uint64_t& line, uint64_t& offset, std::string& malformed) {
    return array_ ? next_element(text, line, offset, malformed) : next_line(text, line, offset, malformed);
  }

  uint64_t bytes_consumed() const { return stream_.offset(); }
  const std::string& path() const { return stream_.path(); }

 private:
  Expected<bool> next_line(std::string& text, uint64_t& line, uint64_t& offset, std::string& malformed) {
    while (true) {
      line = stream_.line_number();
      offset = stream_.offset();
      KIPP_ASSIGN_OR_RETURN(FileStream::LineStatus status, stream_.read_line(text, kMaxRecordBytes));
      if (status == FileStream::LineStatus::End) return false;
      if (status == FileStream::LineStatus::TooLong) {
        malformed = "line longer than " + std::to_string(kMaxRecordBytes >> 20) + " MiB";
        return true;
      }
      if (!is_blank(text)) return true;
    }
  }

  Expected<bool> next_element(std::string& text, uint64_t& line, uint64_t& offset, std::string& malformed) {
    while (true) {
      if (state_ == State::Done) return false;
      KIPP_ASSIGN_OR_RETURN(int c, skip_whitespace());
      line = stream_.line_number();
      offset = stream_.offset();
      if (state_ == State::AfterArray) {
        if (c < 0) return false;
        malformed = "unexpected data after the JSON array";
        state_ = State::Done;
        return true;
      }
      if (c < 0) {
        malformed = "truncated JSON array: the file ends before its closing ']'";
        state_ = State::Done;
        return true;
      }
      if (c == ']') {
        stream_.consume(1);
        state_ = State::AfterArray;
        continue;
      }
      if (c == ',') {
        stream_.consume(1);
        if (after_element_) {
          after_element_ = false;
          continue;
        }
        malformed = "unexpected ',' in the JSON array";
        return true;
      }
      after_element_ = true;
      return scan_element(text, malformed);
    }
  }

  // Reads one element up to (not including) the ',' or ']' that ends it at nesting depth 0.
  Expected<bool> scan_element(std::string& text, std::string& malformed) {
    text.clear();
    int depth = 0;
    JsonStringTracker strings;
    bool too_long = false;
    while (true) {
      KIPP_ASSIGN_OR_RETURN(std::string_view bytes, stream_.available());
      if (bytes.empty()) {
        malformed = "truncated JSON: the file ends inside an array element";
        state_ = State::Done;
        return true;
      }
      size_t i = 0;
      bool ended = false;
      for (; i < bytes.size(); ++i) {
        const char c = bytes[i];
        if (!strings.structural(c)) continue;
        if (c == '{' || c == '[') {
          ++depth;
        } else if (c == '}' || c == ']') {
          if (depth == 0 && c == ']') {
            ended = true;
            break;
          }
          if (depth > 0) --depth;
        } else if (c == ',' && depth == 0) {
          ended = true;
          break;
        }
      }
      if (!too_long && text.size() + i > kMaxRecordBytes) {
        too_long = true;
        text.clear();
        text.shrink_to_fit();
      }
      if (!too_long) text.append(bytes.data(), i);
      stream_.consume(i);
      if (ended) break;
    }
    if (too_long) malformed = "array element longer than " + std::to_string(kMaxRecordBytes >> 20) + " MiB";
    return true;
  }

  // Consumes whitespace; the next byte, or -1 at the end of the file.
  Expected<int> skip_whitespace() {
    while (true) {
      KIPP_ASSIGN_OR_RETURN(std::string_view bytes, stream_.available());
      if (bytes.empty()) return -1;
      size_t i = 0;
      while (i < bytes.size() && (bytes[i] == ' ' || bytes[i] == '\t' || bytes[i] == '\n' || bytes[i] == '\r')) ++i;
      stream_.consume(i);
      if (i < bytes.size()) return static_cast<int>(static_cast<unsigned char>(bytes[i]));
    }
  }

  enum class State { Elements, AfterArray, Done };
  FileStream stream_;
  bool array_ = false;
  State state_ = State::Elements;
  bool after_element_ = false;
};

// Checks and parses one record's text; what is wrong, or empty with `value` set.
std::string parse_record(const std::string& text, uint64_t offset, json& value) {
  if (const auto bad = utf8::first_invalid_byte(text)) {
    return "invalid UTF-8 at byte offset " + std::to_string(offset + *bad);
  }
  std::string problem = json_shape_problem(text);
  if (!problem.empty()) return problem;
  try {
    value = json::parse(text);
  } catch (const json::exception& e) {
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    if (what.starts_with("[json.exception") && bracket != std::string::npos) what.erase(0, bracket + 2);
    return "invalid JSON: " + what;
  }
  return {};
}

std::string in_quotes(std::string_view key) { return "\"" + std::string(key) + "\""; }

// Finds `key` in `object` as a string: what is wrong, or empty with `out` set. An absent key or
// null is an error unless `optional` (then `out` is left empty).
std::string string_field(const json& object, std::string_view prefix, const std::string& key, bool optional,
                         std::string& out) {
  out.clear();
  const auto it = object.find(key);
  if (it == object.end() || (optional && it->is_null())) {
    return optional ? std::string() : std::string(prefix) + "missing key " + in_quotes(key);
  }
  if (!it->is_string()) {
    return std::string(prefix) + "key " + in_quotes(key) + " is " + std::string(it->type_name()) +
           ", expected a string";
  }
  out = it->get_ref<const std::string&>();
  return {};
}

std::string not_object(const json& value, std::string_view what) {
  return std::string(what) + " is " + std::string(value.type_name()) + ", expected a JSON object";
}

std::string alpaca_record(const json& value, Record& record) {
  std::string instruction, input, output, system;
  std::string problem = string_field(value, "", "instruction", false, instruction);
  if (problem.empty()) problem = string_field(value, "", "input", true, input);
  if (problem.empty()) problem = string_field(value, "", "output", false, output);
  if (problem.empty()) problem = string_field(value, "", "system", true, system);
  if (!problem.empty()) return problem;
  if (!system.empty()) record.messages.push_back({"system", std::move(system), std::nullopt});
  if (!input.empty()) instruction += "\n\n" + input;
  record.messages.push_back({"user", std::move(instruction), std::nullopt});
  record.messages.push_back({"assistant", std::move(output), std::nullopt});
  return {};
}

// The list under `key`: what is wrong, or empty with `list` set.
std::string message_list(const json& value, const std::string& key, const json*& list) {
  const auto it = value.find(key);
  if (it == value.end()) return "missing key " + in_quotes(key);
  if (!it->is_array()) return "key " + in_quotes(key) + " is " + std::string(it->type_name()) + ", expected an array";
  if (it->empty()) return "empty conversation (" + in_quotes(key) + " is [])";
  list = &*it;
  return {};
}

// The record's optional "tools": an array of objects, or a string holding one (LLaMA-Factory's
// ShareGPT files store it as JSON text). What is wrong, or empty with `record.tools` set.
std::string tools_field(const json& value, Record& record) {
  const auto it = value.find("tools");
  if (it == value.end() || it->is_null() || (it->is_string() && it->get_ref<const std::string&>().empty())) return {};
  auto tools = parse_chat_tools(it->is_string() ? it->get_ref<const std::string&>() : it->dump());
  if (!tools.ok()) return tools.message();
  record.tools = std::move(*tools);
  return {};
}

// A ShareGPT "function_call" turn's value: JSON text of one {"name", "arguments"} object or an
// array of them, as LLaMA-Factory writes it. What is wrong, or empty with `calls` set.
std::string function_calls(const std::string& where, const std::string& text, std::vector<ChatToolCall>& calls) {
  const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return where + ": the function_call value is not JSON";
  const json list = parsed.is_array() ? parsed : json::array({parsed});
  for (size_t j = 0; j < list.size(); ++j) {
    const std::string at = where + ": call " + std::to_string(j) + ": ";
    const json& call = list[j];
    if (!call.is_object()) return not_object(call, at + "the call");
    ChatToolCall parsed_call;
    std::string problem = string_field(call, at, "name", false, parsed_call.name);
    if (!problem.empty()) return problem;
    const auto arguments = call.find("arguments");
    if (arguments == call.end()) return at + "missing key \"arguments\"";
    if (arguments->is_string()) {
      parsed_call.arguments = arguments->get_ref<const std::string&>();
    } else if (arguments->is_object() || arguments->is_array()) {
      parsed_call.arguments = arguments->dump();
      parsed_call.arguments_is_json = true;
    } else {
      return at + "key \"arguments\" is " + std::string(arguments->type_name()) + ", expected an object or a string";
    }
    calls.push_back(std::move(parsed_call));
  }
  return {};
}

std::string sharegpt_record(const json& value, Record& record) {
  const json* list = nullptr;
  std::string problem = message_list(value, "conversations", list);
  if (!problem.empty()) return problem;
  std::string system;
  problem = string_field(value, "", "system", true, system);
  if (problem.empty()) problem = tools_field(value, record);
  if (!problem.empty()) return problem;
  if (!system.empty()) record.messages.push_back({"system", std::move(system), std::nullopt});
  for (size_t i = 0; i < list->size(); ++i) {
    const json& turn = (*list)[i];
    const std::string where = "conversations[" + std::to_string(i) + "]";
    if (!turn.is_object()) return not_object(turn, where);
    std::string from, text;
    problem = string_field(turn, where + ": ", "from", false, from);
    if (problem.empty()) problem = string_field(turn, where + ": ", "value", false, text);
    if (!problem.empty()) return problem;
    if (from == "function_call") {
      ChatMessage call{"assistant", "", std::nullopt};
      problem = function_calls(where, text, call.tool_calls);
      if (!problem.empty()) return problem;
      record.messages.push_back(std::move(call));
      continue;
    }
    std::string role;
    if (from == "system") {
      role = "system";
    } else if (from == "human" || from == "user") {
      role = "user";
    } else if (from == "gpt" || from == "assistant") {
      role = "assistant";
    } else if (from == "observation" || from == "tool") {
      role = "tool";
    } else {
      return where + ": unsupported role " + in_quotes(from) +
             " (expected system, human, user, gpt, assistant, function_call, observation or tool)";
    }
    record.messages.push_back({std::move(role), std::move(text), std::nullopt});
  }
  return {};
}

// OpenAI messages as the chat layer parses them (the one definition of roles, content,
// reasoning and tool_calls), plus the record's tools. tool_call_id is accepted and not rendered.
std::string openai_record(const json& value, Record& record) {
  const json* list = nullptr;
  std::string problem = message_list(value, "messages", list);
  if (problem.empty()) problem = tools_field(value, record);
  if (!problem.empty()) return problem;
  auto messages = parse_chat_messages(list->dump());
  if (!messages.ok()) return messages.message();
  record.messages = std::move(*messages);
  return {};
}

// Turns a parsed record into `record`: what is wrong, or empty.
std::string to_record(const json& value, DatasetFormat format, const std::string& text_field, Record& record) {
  if (!value.is_object()) return not_object(value, "the record");
  switch (format) {
    case DatasetFormat::Alpaca: return alpaca_record(value, record);
    case DatasetFormat::ShareGpt: return sharegpt_record(value, record);
    case DatasetFormat::OpenAi: return openai_record(value, record);
    default: return string_field(value, "", text_field, false, record.text);
  }
}

class JsonSource final : public RecordSource {
 public:
  JsonSource(DatasetFormat format, std::string text_field) : format_(format), text_field_(std::move(text_field)) {}

  Status open(const std::string& path) { return stream_.open(path); }

  Expected<bool> next(Record& record, std::string& malformed) override {
    while (true) {
      uint64_t line = 0, offset = 0;
      KIPP_ASSIGN_OR_RETURN(bool more, stream_.next(text_, line, offset, malformed));
      if (!more) return false;
      record.text.clear();
      record.messages.clear();
      record.ends_document = true;
      record.origin.file = stream_.path();
      record.origin.line = line;
      if (!malformed.empty()) return true;
      json value;
      malformed = parse_record(text_, offset, value);
      if (malformed.empty()) malformed = to_record(value, format_, text_field_, record);
      if (!malformed.empty()) {
        record.text.clear();
        record.messages.clear();
        return true;
      }
      if (record.is_conversation() || !is_blank(record.text)) return true;
    }
  }

  uint64_t bytes_consumed() const override { return stream_.bytes_consumed(); }

 private:
  DatasetFormat format_;
  std::string text_field_;
  JsonTextStream stream_;
  std::string text_;
};

std::string key_list(const json& object) {
  std::string keys;
  size_t count = 0;
  for (const auto& item : object.items()) {
    if (count++ == 12) {
      keys += ", ...";
      break;
    }
    keys += (keys.empty() ? "" : ", ") + item.key();
  }
  return keys.empty() ? "none" : keys;
}

}  // namespace

Expected<std::unique_ptr<RecordSource>> open_json_source(const std::string& path, DatasetFormat format,
                                                         const DatasetOptions& options) {
  auto source = std::make_unique<JsonSource>(format, options.text_field);
  KIPP_RETURN_IF_ERROR(source->open(path));
  return std::unique_ptr<RecordSource>(std::move(source));
}

Expected<DatasetFormat> detect_json_format(const std::string& path, const DatasetOptions& options) {
  constexpr int kRecordsLooked = 100;
  JsonTextStream stream;
  KIPP_RETURN_IF_ERROR(stream.open(path));
  std::string text, malformed;
  int seen = 0;
  for (; seen < kRecordsLooked; ++seen) {
    uint64_t line = 0, offset = 0;
    malformed.clear();
    KIPP_ASSIGN_OR_RETURN(bool more, stream.next(text, line, offset, malformed));
    if (!more) break;
    json value;
    if (!malformed.empty() || !parse_record(text, offset, value).empty() || !value.is_object()) continue;
    if (value.contains("messages")) return DatasetFormat::OpenAi;
    if (value.contains("conversations")) return DatasetFormat::ShareGpt;
    if (value.contains("instruction") && value.contains("output")) return DatasetFormat::Alpaca;
    if (value.contains(options.text_field)) return DatasetFormat::Jsonl;
    return make_error(
        path + ":" + std::to_string(line) + ": cannot tell the dataset format: the first record has keys " +
        key_list(value) + "; expected " + in_quotes(options.text_field) +
        " (jsonl), \"messages\" (openai), \"conversations\" (sharegpt) or \"instruction\" and \"output\" (alpaca)");
  }
  if (seen == 0) return DatasetFormat::Jsonl;  // no records: nothing to decide
  return make_error(path + ": cannot tell the dataset format: no JSON object among its first " + std::to_string(seen) +
                    " records");
}

}  // namespace kipp::data
