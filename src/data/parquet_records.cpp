// ParquetRecordSource over format/parquet.h: one string column as documents (format Parquet),
// or the Alpaca columns as conversations, read row-aligned one page at a time per column.
// Alpaca follows the JSON reader (json_records.cpp): `instruction` and `output` are required,
// `input` and `system` are optional (a missing column or a null value reads as empty).
#include <string>
#include <utility>
#include <vector>

#include "data/records.h"
#include "format/parquet.h"
#include "tokenizer/utf8.h"

namespace kipp::data {

namespace {

class ParquetSource final : public ParquetRecordSource {
 public:
  // Alpaca: columns_ is instruction, output, then input and system where the file has them.
  ParquetSource(std::string file, DatasetFormat format, std::vector<std::string> columns,
                std::unique_ptr<parquet::StringRowReader> rows)
      : file_(std::move(file)), format_(format), columns_(std::move(columns)), rows_(std::move(rows)) {
    for (size_t i = 2; i < columns_.size(); ++i) {
      if (columns_[i] == "input") input_index_ = i;
      if (columns_[i] == "system") system_index_ = i;
    }
  }

  Expected<bool> next(Record& record, std::string& malformed) override {
    malformed.clear();
    KIPP_ASSIGN_OR_RETURN(const bool more, rows_->next(values_));
    if (!more) return false;
    const uint64_t row = rows_->rows_read();
    record.text.clear();
    record.messages.clear();
    record.ends_document = true;
    record.origin.file = file_;
    record.origin.line = row;
    for (size_t i = 0; i < values_.size(); ++i) {
      const auto prefix = [&] { return "column \"" + columns_[i] + "\""; };
      if (!values_[i]) {
        if (format_ == DatasetFormat::Alpaca && i >= 2) continue;  // optional input / system
        malformed = prefix() + " is null";
        return true;
      }
      if (const auto bad = utf8::first_invalid_byte(*values_[i])) {
        malformed = prefix() + " is not valid UTF-8 (at byte " + std::to_string(*bad) + ")";
        return true;
      }
    }
    if (format_ == DatasetFormat::Parquet) {
      record.text.assign(*values_[0]);
      return true;
    }
    // Alpaca: [system], user (the instruction, then the input after a blank line when there is
    // one), assistant (the output).
    const std::string_view input = optional_value(input_index_);
    const std::string_view system = optional_value(system_index_);
    if (!system.empty()) record.messages.push_back(ChatMessage{"system", std::string(system), std::nullopt, {}});
    std::string user(*values_[0]);
    if (!input.empty()) {
      user += "\n\n";
      user += input;
    }
    record.messages.push_back(ChatMessage{"user", std::move(user), std::nullopt, {}});
    record.messages.push_back(ChatMessage{"assistant", std::string(*values_[1]), std::nullopt, {}});
    return true;
  }

 private:
  std::string file_;
  DatasetFormat format_;
  std::vector<std::string> columns_;
  std::unique_ptr<parquet::StringRowReader> rows_;
  std::vector<std::optional<std::string_view>> values_;
  size_t input_index_ = 0;  // 0: the file has no such column
  size_t system_index_ = 0;

  std::string_view optional_value(size_t index) const {
    if (index == 0 || !values_[index]) return {};
    return *values_[index];
  }
};

}  // namespace

Expected<std::unique_ptr<ParquetRecordSource>> ParquetRecordSource::open(const std::string& file, DatasetFormat format,
                                                                         const DatasetOptions& options) {
  if (format != DatasetFormat::Parquet && format != DatasetFormat::Alpaca) {
    return make_error(file + ": a Parquet file is read as format parquet or alpaca");
  }
  KIPP_ASSIGN_OR_RETURN(auto parquet_file, parquet::ParquetFile::open(file));
  std::vector<std::string> columns;
  if (format == DatasetFormat::Parquet) {
    columns = {options.text_field};
  } else {
    columns = {"instruction", "output"};
    for (const char* optional : {"input", "system"}) {
      if (parquet_file->find_column(optional).ok()) columns.emplace_back(optional);
    }
  }
  KIPP_ASSIGN_OR_RETURN(auto rows, parquet::StringRowReader::open(std::move(parquet_file), columns));
  return std::unique_ptr<ParquetRecordSource>(new ParquetSource(file, format, std::move(columns), std::move(rows)));
}

Expected<std::vector<std::string>> ParquetRecordSource::column_names(const std::string& file) {
  KIPP_ASSIGN_OR_RETURN(auto parquet_file, parquet::ParquetFile::open(file));
  return parquet_file->column_names();
}

}  // namespace kipp::data
