// A file read in fixed blocks, for the dataset readers: lines (whole, or in bounded segments)
// and raw bytes, with the 1-based line number and the byte offset of what comes next. Memory is
// one block plus what the caller keeps, whatever the file size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kipp::data {

class FileStream {
 public:
  FileStream() = default;
  ~FileStream();
  FileStream(const FileStream&) = delete;
  FileStream& operator=(const FileStream&) = delete;

  // Opens `path` and skips a UTF-8 byte order mark at its start.
  Status open(const std::string& path);
  const std::string& path() const { return path_; }

  // The buffered bytes not yet consumed, refilled when empty; empty at the end of the file.
  Expected<std::string_view> available();
  // Consumes the first `count` bytes of available(), counting their line ends.
  void consume(size_t count);

  enum class Segment { Line, Partial, End };
  // Appends the rest of the current line to `out` up to and including its '\n' (Line; also the
  // last line of a file that does not end in one), or only `limit` (> 0) bytes of it (Partial).
  Expected<Segment> read_segment(std::string& out, size_t limit);

  enum class LineStatus { Line, TooLong, End };
  // The next line into `line`, without its "\n" or "\r\n". A line over `limit` bytes is
  // consumed without being kept (TooLong).
  Expected<LineStatus> read_line(std::string& line, size_t limit);

  uint64_t line_number() const { return line_; }  // the line of the next byte
  uint64_t offset() const { return offset_; }     // bytes consumed, the byte order mark included

 private:
  Status fill();

  std::string path_;
  int fd_ = -1;
  std::vector<char> block_;
  size_t begin_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
  uint64_t line_ = 1;
  uint64_t offset_ = 0;
  std::string discard_;
};

// True when `text` holds only ASCII whitespace (or nothing).
bool is_blank(std::string_view text);

}  // namespace kipp::data
