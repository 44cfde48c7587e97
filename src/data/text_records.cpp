#include "data/text_records.h"

#include "data/file_stream.h"
#include "tokenizer/utf8.h"

namespace kipp::data {
namespace {

// The length of the incomplete UTF-8 sequence at the end of `text` (0 when it ends whole), so a
// piece cut inside a line does not split a character.
size_t incomplete_tail(std::string_view text) {
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const auto byte = static_cast<uint8_t>(text[text.size() - back]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t length = 1;
    if (byte >= 0xF0) {
      length = 4;
    } else if (byte >= 0xE0) {
      length = 3;
    } else if (byte >= 0xC0) {
      length = 2;
    }
    return length > back ? back : 0;
  }
  return 0;
}

class TextSource final : public RecordSource {
 public:
  explicit TextSource(std::string separator) : separator_(std::move(separator)) {}

  Status open(const std::string& path) { return stream_.open(path); }

  Expected<bool> next(Record& record, std::string& malformed) override {
    record.text.clear();
    record.messages.clear();
    record.origin.file = stream_.path();
    while (true) {
      if (close_document_) {
        // The skipped last piece of a document whose earlier pieces were handed out: end it.
        close_document_ = false;
        record.ends_document = true;
        record.origin.line = piece_line_;
        return true;
      }
      if (pending_.size() >= kTextPieceBytes) {
        const size_t tail = cut_inside_line_ ? incomplete_tail(pending_) : 0;
        emit(record, pending_.size() - tail, false, malformed);
        return true;
      }
      if (at_end_) return false;
      const size_t before = pending_.size();
      const uint64_t line = stream_.line_number();
      const uint64_t offset = stream_.offset();
      const bool line_start = !cut_inside_line_;
      KIPP_ASSIGN_OR_RETURN(FileStream::Segment segment, stream_.read_segment(pending_, kTextPieceBytes));
      cut_inside_line_ = segment == FileStream::Segment::Partial;
      if (segment == FileStream::Segment::End) {
        at_end_ = true;
        if (finish_document(record, malformed)) return true;
        continue;
      }
      if (line_start && segment == FileStream::Segment::Line &&
          is_separator(std::string_view(pending_).substr(before))) {
        pending_.resize(before);
        if (finish_document(record, malformed)) return true;
        continue;
      }
      if (before == 0) {
        piece_line_ = line;
        piece_offset_ = offset;
      }
    }
  }

  uint64_t bytes_consumed() const override { return stream_.offset(); }

 private:
  bool is_separator(std::string_view line) const {
    if (separator_.empty()) return false;
    if (line.ends_with('\n')) line.remove_suffix(1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    return line == separator_;
  }

  // Ends the current document; true when that produced a record or a malformed report.
  bool finish_document(Record& record, std::string& malformed) {
    if (!document_started_ && is_blank(pending_)) {
      pending_.clear();
      return false;
    }
    emit(record, pending_.size(), true, malformed);
    return true;
  }

  // Hands out pending_[0, size) as a piece and keeps the rest for the next one. A piece with
  // invalid UTF-8 is reported instead; when it ends a document whose earlier pieces were handed
  // out, the next call closes that document with an empty last piece.
  void emit(Record& record, size_t size, bool last, std::string& malformed) {
    std::swap(record.text, pending_);
    pending_.assign(record.text, size);
    record.text.resize(size);
    record.ends_document = last;
    record.origin.line = piece_line_;
    const uint64_t offset = piece_offset_;
    piece_offset_ += size;
    if (!pending_.empty()) piece_line_ = stream_.line_number();  // the rest of a line cut inside
    const bool started = document_started_;
    document_started_ = !last && started;
    if (const auto bad = utf8::first_invalid_byte(record.text)) {
      malformed = "invalid UTF-8 at byte offset " + std::to_string(offset + *bad) +
                  (last && !started ? " (document skipped)" : " (piece of a long document skipped)");
      record.text.clear();
      close_document_ = last && started;
      return;
    }
    if (!last) document_started_ = true;
  }

  std::string separator_;
  FileStream stream_;
  std::string pending_;      // the current piece's bytes
  uint64_t piece_line_ = 1;  // where pending_ starts
  uint64_t piece_offset_ = 0;
  bool cut_inside_line_ = false;   // pending_ ends inside a line longer than a piece
  bool document_started_ = false;  // pieces of the current document were handed out
  bool close_document_ = false;
  bool at_end_ = false;
};

}  // namespace

Expected<std::unique_ptr<RecordSource>> open_text_source(const std::string& path, const std::string& separator) {
  auto source = std::make_unique<TextSource>(separator);
  KIPP_RETURN_IF_ERROR(source->open(path));
  return std::unique_ptr<RecordSource>(std::move(source));
}

}  // namespace kipp::data
