#include "train/tfevents.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

namespace kipp::train {
namespace {

// A plain 256-entry table, built at compile time. Debian ships no CRC32C library we could link
// here (and none of our dependencies exposes one), the records are a few hundred bytes each,
// so byte-at-a-time is fast enough; slicing-by-8 or the SSE4.2 crc32 instruction would only
// add code.
constexpr uint32_t kCastagnoliReflected = 0x82F63B78u;

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kCastagnoliReflected : 0u);
    table[byte] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protobuf wire format: a key is (field << 3) | wire type.
enum WireType : uint8_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(char(uint8_t(value) | 0x80));
    value >>= 7;
  }
  out.push_back(char(uint8_t(value)));
}

void put_key(std::string& out, uint32_t field, WireType type) { put_varint(out, (uint64_t(field) << 3) | type); }

void put_fixed(std::string& out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char(uint8_t(bits >> (8 * i))));
}

void put_double(std::string& out, uint32_t field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed64);
  put_fixed(out, bits, 8);
}

void put_float(std::string& out, uint32_t field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, kFixed32);
  put_fixed(out, bits, 4);
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Event fields (event.proto).
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5, kEventSessionLog = 7;
// Summary / Summary.Value / SummaryMetadata / TensorProto fields (summary.proto, tensor.proto).
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kValueTag = 1, kValueSimpleValue = 2, kValueTensor = 8, kValueMetadata = 9;
constexpr uint32_t kMetadataPluginData = 1, kPluginName = 1;
constexpr uint32_t kTensorDtype = 1, kTensorShape = 2, kTensorStringVal = 8;
constexpr uint64_t kDtString = 7;
constexpr uint32_t kSessionLogStatus = 1;
constexpr uint64_t kSessionStart = 1;

// wall_time and step; canonical proto3 leaves zero values out.
std::string event_header(double wall_time, int64_t step) {
  std::string event;
  if (wall_time != 0) put_double(event, kEventWallTime, wall_time);
  if (step != 0) {
    put_key(event, kEventStep, kVarint);
    put_varint(event, uint64_t(step));  // int64: negative values as 10-byte two's complement
  }
  return event;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  std::string host = name;
  for (char& c : host) {
    if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '_';
  }
  return host;
}

}  // namespace

uint32_t crc32c(std::span<const uint8_t> bytes, uint32_t crc) {
  crc = ~crc;
  for (const uint8_t byte : bytes) crc = kCrc32cTable[(crc ^ byte) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

uint32_t crc32c(std::string_view bytes, uint32_t crc) {
  return crc32c(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), crc);
}

uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string frame_record(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  put_fixed(record, data.size(), 8);
  put_fixed(record, mask_crc32c(crc32c(std::string_view(record))), 4);
  record.append(data);
  put_fixed(record, mask_crc32c(crc32c(data)), 4);
  return record;
}

float to_summary_float(double value) {
  constexpr double kMax = std::numeric_limits<float>::max();
  if (std::isfinite(value) && std::fabs(value) > kMax) {
    return value > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(value);
}

std::string encode_file_version_event(double wall_time, std::string_view version) {
  std::string event = event_header(wall_time, 0);
  put_bytes(event, kEventFileVersion, version);
  return event;
}

std::string encode_scalars_event(double wall_time, int64_t step, std::span<const ScalarValue> values) {
  std::string summary;
  for (const ScalarValue& scalar : values) {
    std::string value;
    put_bytes(value, kValueTag, scalar.tag);
    put_float(value, kValueSimpleValue, scalar.value);  // in a oneof: written even when 0
    put_bytes(summary, kSummaryValue, value);
  }
  std::string event = event_header(wall_time, step);
  put_bytes(event, kEventSummary, summary);
  return event;
}

std::string encode_text_event(double wall_time, int64_t step, std::string_view tag, std::string_view text) {
  std::string plugin_data;
  put_bytes(plugin_data, kPluginName, "text");
  std::string metadata;
  put_bytes(metadata, kMetadataPluginData, plugin_data);
  std::string tensor;
  put_key(tensor, kTensorDtype, kVarint);
  put_varint(tensor, kDtString);
  put_bytes(tensor, kTensorShape, "");  // no dims: a scalar
  put_bytes(tensor, kTensorStringVal, text);
  std::string value;
  put_bytes(value, kValueTag, tag);
  put_bytes(value, kValueTensor, tensor);
  put_bytes(value, kValueMetadata, metadata);
  std::string summary;
  put_bytes(summary, kSummaryValue, value);
  std::string event = event_header(wall_time, step);
  put_bytes(event, kEventSummary, summary);
  return event;
}

std::string encode_session_start_event(double wall_time, int64_t step) {
  std::string session_log;
  put_key(session_log, kSessionLogStatus, kVarint);
  put_varint(session_log, kSessionStart);
  std::string event = event_header(wall_time, step);
  put_bytes(event, kEventSessionLog, session_log);
  return event;
}

Expected<EventFileWriter> EventFileWriter::create(const std::string& dir, double wall_time) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return make_error("cannot create " + dir + ": " + error.message());
  const std::string base = dir + "/events.out.tfevents." +
                           std::to_string(static_cast<uint64_t>(std::max(0.0, wall_time))) + "." + host_name();
  // "x": fail rather than overwrite, so two writers in the same second never share a file.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::string path = attempt == 0 ? base : base + "." + std::to_string(attempt);
    std::FILE* stream = std::fopen(path.c_str(), "wbx");
    if (stream == nullptr) {
      if (errno == EEXIST) continue;
      return make_error("cannot create " + path + ": " + std::strerror(errno));
    }
    EventFileWriter writer(path, stream);
    KIPP_RETURN_IF_ERROR(writer.write_event(encode_file_version_event(wall_time)));
    return writer;
  }
  return make_error("cannot create an event file in " + dir + ": too many files named " + base + ".*");
}

Status EventFileWriter::write_event(std::string_view serialized_event) {
  const std::string record = frame_record(serialized_event);
  if (std::fwrite(record.data(), 1, record.size(), stream_.get()) != record.size() || std::fflush(stream_.get()) != 0) {
    return make_error("cannot write " + path_ + ": " + std::strerror(errno));
  }
  return ok_status();
}

Status EventFileWriter::write_scalars(double wall_time, int64_t step, std::span<const ScalarValue> values) {
  return write_event(encode_scalars_event(wall_time, step, values));
}

Status EventFileWriter::write_text(double wall_time, int64_t step, std::string_view tag, std::string_view text) {
  return write_event(encode_text_event(wall_time, step, tag, text));
}

Status EventFileWriter::write_session_start(double wall_time, int64_t step) {
  return write_event(encode_session_start_event(wall_time, step));
}

}  // namespace kipp::train
