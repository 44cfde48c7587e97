// Dataset readers: files in any supported format streamed as records (a document's text, or a
// conversation), with bounded memory whatever the file size. Malformed records are counted and
// reported with file and line, then skipped; in strict mode the first one is an error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "core/status.h"

namespace kipp::data {

enum class DatasetFormat {
  Auto,      // from the extension and, for JSON/JSONL/Parquet, the first record's keys or columns
  Text,      // UTF-8 text; one document per file, or per `document_separator`
  Jsonl,     // one JSON object per line, the document in `text_field`
  Csv,       // RFC 4180, a header row, the document in column `text_field`
  Parquet,   // the string column `text_field`
  Alpaca,    // {instruction, input, output} (JSONL, JSON array or Parquet columns)
  ShareGpt,  // {conversations: [{from: system|human|gpt, value}]}
  OpenAi,    // {messages: [{role, content, tool_calls?}], tools?}
};

std::string_view dataset_format_name(DatasetFormat format);  // "auto", "text", "jsonl", ...
Expected<DatasetFormat> parse_dataset_format(std::string_view name);

struct DatasetOptions {
  DatasetFormat format = DatasetFormat::Auto;
  std::string text_field = "text";  // JSONL key, CSV column (by header name), Parquet column
  // Text files: a line equal to this string ends a document (fortune files use "%"); empty:
  // the whole file is one document.
  std::string document_separator;
  bool strict = false;  // a malformed record is an error instead of being skipped
};

// Where a record came from: "data.jsonl:17". `line` is the 1-based line where the record
// starts (text, JSONL, CSV, JSON arrays) or the 1-based row (Parquet).
struct RecordOrigin {
  std::string file;
  uint64_t line = 0;
  std::string to_string() const;
};

struct Record {
  // A plain document when `messages` is empty; a conversation otherwise (`text` unused).
  std::string text;
  std::vector<ChatMessage> messages;
  // A conversation's tool definitions (ChatOptions::tools), from the record's "tools".
  std::vector<std::string> tools;
  // False for all but the last piece of a document too large to hold at once (a text file with
  // no separator is read in pieces of about 1 MiB, cut at line ends): no end token follows it.
  bool ends_document = true;
  RecordOrigin origin;

  bool is_conversation() const { return !messages.empty(); }
};

struct ReadStats {
  uint64_t records = 0;    // records returned
  uint64_t malformed = 0;  // skipped
  uint64_t files = 0;      // files opened so far
  uint64_t bytes = 0;      // input bytes consumed so far (for progress)
};

// Files, globs ("data/*.jsonl") and folders (every regular file below, recursively, skipping
// hidden ones) in a sorted, de-duplicated list. An input matching nothing is an error naming it.
Expected<std::vector<std::string>> expand_inputs(const std::vector<std::string>& inputs);

class RecordReader {
 public:
  // `on_malformed` gets one line per skipped record ("data.jsonl:17: missing key \"text\"").
  static Expected<std::unique_ptr<RecordReader>> open(std::vector<std::string> files, const DatasetOptions& options,
                                                      std::function<void(const std::string&)> on_malformed = {});
  virtual ~RecordReader() = default;

  // The next record into `record`; false at the end of the last file. Errors: unreadable
  // file, or a malformed record under `strict` (naming file and line).
  virtual Expected<bool> next(Record& record) = 0;
  virtual const ReadStats& stats() const = 0;
  // Sum of the input files' sizes (for progress against stats().bytes).
  virtual uint64_t total_bytes() const = 0;
};

// One Parquet file's records (implemented in parquet_records.cpp over format/parquet.h):
// `format` is Parquet (column `text_field`) or Alpaca (columns instruction, input, output).
// A malformed row comes back through next()'s `malformed`; RecordReader counts and reports it.
class ParquetRecordSource {
 public:
  static Expected<std::unique_ptr<ParquetRecordSource>> open(const std::string& file, DatasetFormat format,
                                                             const DatasetOptions& options);
  virtual ~ParquetRecordSource() = default;
  // The next row's record; false at the end. A null or invalid-UTF-8 value makes the row
  // malformed: returns an error message through `malformed` (non-empty) and true.
  virtual Expected<bool> next(Record& record, std::string& malformed) = 0;
  // Column names of a file, for format detection (Auto) and error hints.
  static Expected<std::vector<std::string>> column_names(const std::string& file);
};

}  // namespace kipp::data
