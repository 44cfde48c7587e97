// JSON records: JSONL (one value per line; blank lines skipped) or, when a file's first
// non-space byte is '[', one JSON array streamed element by element by a string- and
// escape-aware bracket scanner. Each record is parsed with nlohmann-json after a nesting-depth
// check and turned into a document (Jsonl) or a conversation (Alpaca, ShareGpt, OpenAi).
#pragma once

#include <memory>
#include <string>

#include "data/record_source.h"

namespace kipp::data {

// `format` is Jsonl, Alpaca, ShareGpt or OpenAi.
Expected<std::unique_ptr<RecordSource>> open_json_source(const std::string& path, DatasetFormat format,
                                                         const DatasetOptions& options);

// Auto for a JSON/JSONL file, from the keys of its first object: "messages" -> OpenAi,
// "conversations" -> ShareGpt, "instruction" and "output" -> Alpaca, `text_field` -> Jsonl.
// A file with no records is Jsonl; one whose first object has none of those keys, or with no
// object among its first records, is an error naming the file.
Expected<DatasetFormat> detect_json_format(const std::string& path, const DatasetOptions& options);

}  // namespace kipp::data
