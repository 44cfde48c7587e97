// libFuzzer target for the dataset record readers (data/records.h: JSONL, JSON arrays, CSV,
// text, Alpaca, ShareGPT, OpenAI); build and run with `scripts/fuzz.sh SECONDS records`.
//
// The first input byte picks the format and how it is given; the rest is the file, written to a
// scratch file with the extension that format uses. The file is read to its end through
// RecordReader, non-strict and then strict. Malformed records and errors are expected; what
// must never happen is a crash, a sanitizer report, or a record that breaks the reader's
// promises (a plain document has no messages; conversations have no text; UTF-8 is valid).
//
// First byte: bits 0-2 the format (below); bit 3 set: format Auto (detected from the extension
// and the first record) instead of naming it; bit 4 set: JSON formats use ".json" instead of
// ".jsonl" (the reader takes both as JSONL or a JSON array, from the first byte); bit 5 set:
// CSV and JSONL read the key/column "content" instead of "text".
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/records.h"
#include "fuzz_temp_file.h"
#include "tokenizer/utf8.h"

namespace {

using kipp::data::DatasetFormat;

void check(bool condition) {
  if (!condition) __builtin_trap();
}

struct Choice {
  DatasetFormat format;
  const char* extension;
  const char* separator;  // text only
};

constexpr Choice kChoices[8] = {
    {DatasetFormat::Jsonl, ".jsonl", ""},  {DatasetFormat::Jsonl, ".json", ""},  // JSONL / JSON array
    {DatasetFormat::Csv, ".csv", ""},      {DatasetFormat::Text, ".txt", "%"},   // text, fortune-style
    {DatasetFormat::Alpaca, ".jsonl", ""}, {DatasetFormat::ShareGpt, ".jsonl", ""},
    {DatasetFormat::OpenAi, ".jsonl", ""}, {DatasetFormat::Text, ".txt", ""},  // text, whole file
};

// More records than a small input can hold only by bugs; a guard against a reader that loops.
constexpr uint64_t kMaxRecords = 1u << 20;

volatile size_t g_sink = 0;

void read_all(const std::string& path, const kipp::data::DatasetOptions& options) {
  uint64_t reported = 0;
  auto reader = kipp::data::RecordReader::open({path}, options, [&](const std::string& line) {
    ++reported;
    g_sink = g_sink + line.size();
  });
  if (!reader.ok()) {
    check(reader.message().find(path) != std::string::npos);
    return;
  }
  kipp::data::Record record;
  uint64_t records = 0;
  while (true) {
    auto more = (*reader)->next(record);
    if (!more.ok()) {
      check(options.strict);                                  // only strict mode turns a malformed record into an error
      check(more.message().find(path) != std::string::npos);  // errors name the file
      break;
    }
    if (!*more) break;
    check(++records <= kMaxRecords);
    check(record.origin.file == path && record.origin.line >= 1);
    if (record.is_conversation()) {
      check(record.text.empty());
      for (const auto& message : record.messages) {
        check(message.role == "system" || message.role == "user" || message.role == "assistant" ||
              message.role == "tool");
        check(!kipp::utf8::first_invalid_byte(message.content));
      }
    } else {
      check(!kipp::utf8::first_invalid_byte(record.text));
    }
    g_sink = g_sink + record.text.size() + record.messages.size();
  }
  const auto& stats = (*reader)->stats();
  check(stats.records == records);
  check(stats.bytes <= (*reader)->total_bytes());
  if (!options.strict) check(reported <= stats.malformed + 1);  // +1: the "... more" summary line
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const Choice& choice = kChoices[selector & 7];
  const bool automatic = (selector & 8) != 0;
  std::string extension = choice.extension;
  if ((selector & 16) != 0 && extension == ".jsonl") extension = ".json";
  const std::string& path = kipp::fuzz::write_temp_file(data + 1, size - 1, extension);

  kipp::data::DatasetOptions options;
  options.format = automatic ? DatasetFormat::Auto : choice.format;
  options.document_separator = choice.separator;
  if ((selector & 32) != 0) options.text_field = "content";
  options.strict = false;
  read_all(path, options);
  options.strict = true;
  read_all(path, options);
  return 0;
}
