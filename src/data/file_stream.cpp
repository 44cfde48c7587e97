#include "data/file_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kipp::data {
namespace {

constexpr size_t kBlockBytes = size_t{256} << 10;

}  // namespace

FileStream::~FileStream() {
  if (fd_ >= 0) ::close(fd_);
}

Status FileStream::open(const std::string& path) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return make_error("cannot open " + path + ": " + std::strerror(errno));
  block_.resize(kBlockBytes);
  KIPP_ASSIGN_OR_RETURN(std::string_view head, available());
  if (head.size() >= 3 && head.substr(0, 3) == "\xEF\xBB\xBF") {
    begin_ += 3;
    offset_ += 3;
  }
  return {};
}

Status FileStream::fill() {
  begin_ = 0;
  end_ = 0;
  while (!eof_ && end_ == 0) {
    const ssize_t got = ::read(fd_, block_.data(), block_.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      return make_error("reading " + path_ + ": " + std::strerror(errno));
    }
    if (got == 0) eof_ = true;
    end_ = static_cast<size_t>(got);
  }
  return {};
}

Expected<std::string_view> FileStream::available() {
  if (begin_ == end_ && !eof_) KIPP_RETURN_IF_ERROR(fill());
  return std::string_view(block_.data() + begin_, end_ - begin_);
}

void FileStream::consume(size_t count) {
  count = std::min(count, end_ - begin_);
  line_ += static_cast<uint64_t>(std::count(block_.data() + begin_, block_.data() + begin_ + count, '\n'));
  begin_ += count;
  offset_ += count;
}

Expected<FileStream::Segment> FileStream::read_segment(std::string& out, size_t limit) {
  size_t taken = 0;
  while (true) {
    KIPP_ASSIGN_OR_RETURN(std::string_view bytes, available());
    if (bytes.empty()) return taken > 0 ? Segment::Line : Segment::End;
    const size_t room = std::min(bytes.size(), limit - taken);
    const void* newline = std::memchr(bytes.data(), '\n', room);
    const size_t count =
        newline != nullptr ? static_cast<size_t>(static_cast<const char*>(newline) - bytes.data()) + 1 : room;
    out.append(bytes.data(), count);
    consume(count);
    taken += count;
    if (newline != nullptr) return Segment::Line;
    if (taken == limit) return Segment::Partial;
  }
}

Expected<FileStream::LineStatus> FileStream::read_line(std::string& line, size_t limit) {
  line.clear();
  KIPP_ASSIGN_OR_RETURN(Segment segment, read_segment(line, limit + 2));
  if (segment == Segment::End) return LineStatus::End;
  if (segment == Segment::Partial) {
    line.clear();
    while (segment == Segment::Partial) {
      discard_.clear();
      KIPP_ASSIGN_OR_RETURN(segment, read_segment(discard_, kBlockBytes));
    }
    return LineStatus::TooLong;
  }
  if (!line.empty() && line.back() == '\n') line.pop_back();
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.size() > limit) {
    line.clear();
    return LineStatus::TooLong;
  }
  return LineStatus::Line;
}

bool is_blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; });
}

}  // namespace kipp::data
