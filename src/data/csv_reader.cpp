#include "data/csv_reader.h"

#include <vector>

#include "data/file_stream.h"
#include "tokenizer/utf8.h"

namespace kipp::data {
namespace {

constexpr size_t kMaxColumns = size_t{1} << 16;
constexpr size_t kSegmentBytes = size_t{1} << 20;

class CsvSource final : public RecordSource {
 public:
  Status open(const std::string& path, const std::string& text_field) {
    KIPP_RETURN_IF_ERROR(stream_.open(path));
    uint64_t line = 0;
    size_t count = 0;
    std::string malformed;
    KIPP_ASSIGN_OR_RETURN(bool more, next_row(header_, kMaxColumns, line, count, malformed));
    if (!more) return {};  // an empty file: no columns, no records
    if (!malformed.empty())
      return make_error(path + ":" + std::to_string(line) + ": malformed CSV header: " + malformed);
    if (count > kMaxColumns) return make_error(path + ": more than " + std::to_string(kMaxColumns) + " CSV columns");
    for (size_t i = 0; i < header_.size(); ++i) {
      if (header_[i] == text_field) {
        column_ = i;
        return {};
      }
    }
    std::string columns;
    for (const std::string& name : header_) columns += (columns.empty() ? "\"" : ", \"") + name + "\"";
    return make_error(path + ": no column \"" + text_field + "\" in the CSV header (columns: " + columns + ")");
  }

  Expected<bool> next(Record& record, std::string& malformed) override {
    record.messages.clear();
    record.ends_document = true;
    record.origin.file = stream_.path();
    while (true) {
      record.text.clear();
      if (header_.empty()) return false;
      uint64_t line = 0;
      size_t count = 0;
      KIPP_ASSIGN_OR_RETURN(bool more, next_row(fields_, header_.size(), line, count, malformed));
      if (!more) return false;
      record.origin.line = line;
      if (!malformed.empty()) return true;
      if (count != header_.size()) {
        malformed = "row has " + std::to_string(count) + " fields, the header has " + std::to_string(header_.size());
        return true;
      }
      if (const auto bad = utf8::first_invalid_byte(fields_[column_])) {
        malformed =
            "invalid UTF-8 in column \"" + header_[column_] + "\" at byte " + std::to_string(*bad) + " of the field";
        return true;
      }
      if (is_blank(fields_[column_])) continue;
      record.text = std::move(fields_[column_]);
      return true;
    }
  }

  uint64_t bytes_consumed() const override { return stream_.offset(); }

 private:
  // The next row into `fields` (at most `max_fields` kept; `count` is the number the row has),
  // with the line it starts on; false at the end of the file. Blank lines are skipped.
  Expected<bool> next_row(std::vector<std::string>& fields, size_t max_fields, uint64_t& line, size_t& count,
                          std::string& malformed) {
    enum class State { FieldStart, Unquoted, Quoted, AfterQuote };
    fields.clear();
    count = 0;
    State state = State::FieldStart;
    std::string field;
    size_t row_bytes = 0;
    bool started = false, too_long = false, after_quote = false, row_ended = false;
    auto end_field = [&] {
      if (state == State::Unquoted && field.ends_with('\r')) field.pop_back();
      if (!too_long && count < max_fields) fields.push_back(std::move(field));
      field.clear();
      ++count;
      state = State::FieldStart;
    };
    while (!row_ended) {
      const uint64_t segment_line = stream_.line_number();
      segment_.clear();
      KIPP_ASSIGN_OR_RETURN(FileStream::Segment segment, stream_.read_segment(segment_, kSegmentBytes));
      if (segment == FileStream::Segment::End) {
        if (!started) return false;
        if (state == State::Quoted) {
          malformed = "unterminated quoted field (the file ends inside quotes)";
          fields.clear();
          return true;
        }
        break;
      }
      if (!started) {
        if (segment == FileStream::Segment::Line && (segment_ == "\n" || segment_ == "\r\n")) continue;
        started = true;
        line = segment_line;
      }
      row_bytes += segment_.size();
      if (row_bytes > kMaxRecordBytes && !too_long) {
        too_long = true;
        fields.clear();
        field.clear();
        field.shrink_to_fit();
      }
      for (const char c : segment_) {
        switch (state) {
          case State::FieldStart:
            if (c == '"') {
              state = State::Quoted;
              break;
            }
            state = State::Unquoted;
            [[fallthrough]];
          case State::Unquoted:
            if (c == ',') {
              end_field();
            } else if (c == '\n') {
              row_ended = true;
            } else if (!too_long) {
              field += c;
            }
            break;
          case State::Quoted:
            if (c == '"') {
              state = State::AfterQuote;
            } else if (!too_long) {
              field += c;
            }
            break;
          case State::AfterQuote:
            if (c == '"') {
              if (!too_long) field += '"';
              state = State::Quoted;
            } else if (c == ',') {
              end_field();
            } else if (c == '\n') {
              row_ended = true;
            } else if (c != '\r') {
              after_quote = true;
            }
            break;
        }
      }
    }
    end_field();
    if (too_long) {
      malformed = "CSV row longer than " + std::to_string(kMaxRecordBytes >> 20) + " MiB";
    } else if (after_quote) {
      malformed = "unexpected character after a closing quote";
    }
    if (!malformed.empty()) fields.clear();
    return true;
  }

  FileStream stream_;
  std::vector<std::string> header_;
  size_t column_ = 0;
  std::vector<std::string> fields_;
  std::string segment_;
};

}  // namespace

Expected<std::unique_ptr<RecordSource>> open_csv_source(const std::string& path, const DatasetOptions& options) {
  auto source = std::make_unique<CsvSource>();
  KIPP_RETURN_IF_ERROR(source->open(path, options.text_field));
  return std::unique_ptr<RecordSource>(std::move(source));
}

}  // namespace kipp::data
