// The per-file side of RecordReader (records.cpp): one file's records in one format, streamed.
// Sources report a malformed record through `malformed` and leave skipping, counting, capping
// the reports and strict mode to the reader, so every format behaves the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "data/records.h"

namespace kipp::data {

// Text files are handed out in pieces of about this size, cut at line ends.
inline constexpr size_t kTextPieceBytes = size_t{1} << 20;
// A JSONL line, JSON array element or CSV record longer than this is malformed (never held).
inline constexpr size_t kMaxRecordBytes = size_t{64} << 20;
// JSON nested deeper than this is malformed (nlohmann's parser recurses once per level).
inline constexpr int kMaxJsonDepth = 256;

class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // The next record into `record` (its origin set), or false at the end of the file. A
  // malformed record sets `malformed` to what is wrong (no file or line prefix: the reader adds
  // record.origin) and returns true. Errors: the file cannot be read.
  virtual Expected<bool> next(Record& record, std::string& malformed) = 0;
  // Input bytes consumed so far.
  virtual uint64_t bytes_consumed() const = 0;
};

}  // namespace kipp::data
