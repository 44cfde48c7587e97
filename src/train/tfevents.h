// TensorBoard event files, written from the published formats: the TFRecord framing
// (tensorflow/core/lib/io/record_writer: length, masked CRC32C of the length, data, masked
// CRC32C of the data) around hand-encoded `tensorflow.Event` protobufs (event.proto,
// summary.proto). Only what a training log needs: the file_version record, scalar summaries,
// text summaries (the "text" plugin's string tensor) and a SessionLog START on resume.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kipp::train {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF).
// `crc` continues an earlier value: crc32c(b, crc32c(a)) == crc32c(a + b).
uint32_t crc32c(std::span<const uint8_t> bytes, uint32_t crc = 0);
uint32_t crc32c(std::string_view bytes, uint32_t crc = 0);
// The TFRecord mask: rotate right by 15 and add 0xa282ead8 (so CRCs of CRCs stay useful).
uint32_t mask_crc32c(uint32_t crc);

// One TFRecord: u64 length (LE), u32 masked CRC of those 8 bytes, data, u32 masked CRC of data.
std::string frame_record(std::string_view data);

struct ScalarValue {
  std::string tag;
  float value = 0;
};

// Serialized tensorflow.Event messages (canonical proto3: zero wall_time/step are omitted).
std::string encode_file_version_event(double wall_time, std::string_view version = "brain.Event:2");
std::string encode_scalars_event(double wall_time, int64_t step, std::span<const ScalarValue> values);
// A Summary.Value holding a scalar DT_STRING tensor with plugin "text" (TensorBoard's Text tab).
std::string encode_text_event(double wall_time, int64_t step, std::string_view tag, std::string_view text);
// SessionLog{status: START} at `step`: TensorBoard drops what it holds at steps >= `step`, so a
// resumed run's re-done steps replace the ones the interrupted run logged.
std::string encode_session_start_event(double wall_time, int64_t step);

// Double to float for a summary: finite values beyond float's range become +-infinity.
float to_summary_float(double value);

// Appends framed events to one event file, flushing after each record.
class EventFileWriter {
 public:
  // Creates `dir` if needed and a new file events.out.tfevents.<whole seconds>.<host> in it
  // (".1", ".2", ... appended when that name exists), starting with the file_version record.
  static Expected<EventFileWriter> create(const std::string& dir, double wall_time);

  Status write_event(std::string_view serialized_event);
  Status write_scalars(double wall_time, int64_t step, std::span<const ScalarValue> values);
  Status write_text(double wall_time, int64_t step, std::string_view tag, std::string_view text);
  Status write_session_start(double wall_time, int64_t step);

  const std::string& path() const { return path_; }

 private:
  struct Closer {
    void operator()(std::FILE* stream) const { std::fclose(stream); }
  };
  EventFileWriter(std::string path, std::FILE* stream) : path_(std::move(path)), stream_(stream) {}

  std::string path_;
  std::unique_ptr<std::FILE, Closer> stream_;
};

}  // namespace kipp::train
