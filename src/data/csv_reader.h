// CSV files as records (RFC 4180): a header row names the columns and the document is the
// column `text_field`. Quoted fields may hold commas, "" escapes and line breaks (kept as they
// are); lines end in LF or CRLF; blank lines between rows are skipped. A row with the wrong
// number of fields, an unterminated quote or a character after a closing quote is malformed.
// A quote inside an unquoted field is taken literally.
#pragma once

#include <memory>
#include <string>

#include "data/record_source.h"

namespace kipp::data {

// Reads the header: a missing `options.text_field` column is an error listing the columns. An
// empty file has no records.
Expected<std::unique_ptr<RecordSource>> open_csv_source(const std::string& path, const DatasetOptions& options);

}  // namespace kipp::data
