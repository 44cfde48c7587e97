// GGUF v3: an in-memory model of a file's metadata and tensor directory, a parser that
// validates a byte range (an mmap) without copying tensor data, and a streaming writer.
// Specification: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "format/ggml_types.h"

namespace kipp {

enum class GgufValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

// "u8", "i32", "f32", "string", "array", ... ("unknown" for an id outside 0..12).
std::string_view gguf_value_type_name(GgufValueType type);
// Wire size of one scalar of `type`; 0 for STRING, ARRAY and unknown ids.
size_t gguf_scalar_size(GgufValueType type);

// One metadata value. Scalars keep their exact wire type so a file reads back bit for bit.
// Arrays hold elements of one type; arrays of arrays are allowed by the format.
class GgufValue {
 public:
  static GgufValue u8(uint8_t v);
  static GgufValue i8(int8_t v);
  static GgufValue u16(uint16_t v);
  static GgufValue i16(int16_t v);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue i64(int64_t v);
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue string_array(std::vector<std::string> items);
  static GgufValue i32_array(const std::vector<int32_t>& items);
  static GgufValue u32_array(const std::vector<uint32_t>& items);
  static GgufValue f32_array(const std::vector<float>& items);
  // Every item must have type `element_type`.
  static GgufValue array(GgufValueType element_type, std::vector<GgufValue> items);

  GgufValueType type() const { return type_; }
  GgufValueType array_type() const { return array_type_; }  // meaningful for ARRAY only

  // Typed reads; nullopt / nullptr when the value is not of a matching type.
  std::optional<uint64_t> as_uint() const;  // any integer type holding a value >= 0
  std::optional<int64_t> as_int() const;    // any integer type fitting int64
  std::optional<double> as_float() const;   // FLOAT32 or FLOAT64
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const std::vector<GgufValue>* as_array() const;
  // The items of an array of strings, or nullopt.
  std::optional<std::vector<std::string>> as_string_array() const;
  // A scalar's payload: unsigned integers and bool zero-extended, signed integers
  // sign-extended, floats as their IEEE bits (so NaN payloads survive a round trip).
  uint64_t bits() const { return bits_; }

  // Short rendering for `kipp inspect`: 1000000, "qwen3" (quoted, escaped, cut near 60
  // bytes), [151936 x string: "!", "#", "$", "%", ...] (only the first items of an array).
  std::string describe() const;

  bool operator==(const GgufValue& other) const;

 private:
  static GgufValue scalar(GgufValueType type, uint64_t bits);

  GgufValueType type_ = GgufValueType::UINT8;
  GgufValueType array_type_ = GgufValueType::UINT8;
  uint64_t bits_ = 0;  // scalar payload: integers, bool and the IEEE bits of floats
  std::string string_;
  std::shared_ptr<const std::vector<GgufValue>> items_;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: innermost (columns) first
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;      // from the start of the data section
  uint64_t size_bytes = 0;  // derived from dims and type

  // Product of dims (meaningful for validated tensors, where it cannot overflow).
  uint64_t element_count() const;

  bool operator==(const GgufTensorInfo&) const = default;
};

struct GgufMetadataEntry {
  std::string key;
  GgufValue value;
};

// A parsed file: every check of the format is done by parse(); tensor data is not copied.
class GgufFile {
 public:
  static constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little endian
  static constexpr uint32_t kVersion = 3;
  static constexpr uint32_t kDefaultAlignment = 32;
  static constexpr uint32_t kMaxDims = 4;
  static constexpr size_t kMaxTensorNameBytes = 64;  // the spec's limit
  static constexpr int kMaxArrayDepth = 8;           // an array inside 7 more arrays at most
  static constexpr std::string_view kAlignmentKey = "general.alignment";

  // Validates header, metadata, tensor directory, alignment and that every tensor's data lies
  // inside `bytes` without overlapping another. `bytes` must outlive the GgufFile.
  // Safe on hostile input: every failure is an error naming the field, never a crash.
  static Expected<GgufFile> parse(std::span<const uint8_t> bytes);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // from the start of the file
  const std::vector<GgufMetadataEntry>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  std::span<const uint8_t> tensor_data(const GgufTensorInfo& tensor) const;

 private:
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufMetadataEntry> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Writes a GGUF v3 file in two phases so tensors can be streamed one at a time:
// declare metadata and tensors, begin() writes the header and directory, then
// write_tensor() is called once per tensor in declaration order, then finish().
// The file appears at `path` only after a successful finish() (atomic rename). Gaps between
// tensors and the end of the file are zero-padded to the alignment.
class GgufWriter {
 public:
  // Metadata keeps insertion order; `general.alignment` is appended as a u32 when the
  // alignment is not 32 and the caller did not add that key. Adding `general.alignment`
  // (u32) sets the alignment, and set_alignment() updates an added entry, so the two agree.
  // Invalid input (duplicate keys, bad shapes, ...) is reported by begin()/to_bytes().
  void set_alignment(uint32_t alignment);
  void add_metadata(std::string key, GgufValue value);
  // Offsets are assigned in declaration order, each aligned.
  void add_tensor(std::string name, std::vector<uint64_t> dims, GgmlType type);
  const std::vector<GgufMetadataEntry>& metadata() const { return metadata_; }

  Status begin(const std::string& path);
  Status write_tensor(std::string_view name, std::span<const uint8_t> data);
  // The same tensor in consecutive pieces (bounded memory for large tensors): the pieces of
  // one tensor must add up to its size before the next tensor starts.
  Status write_tensor_part(std::string_view name, std::span<const uint8_t> part);
  Status finish();

  // One call for files whose tensors are all in memory (tests, small tools).
  Status write_all(const std::string& path, const std::vector<std::span<const uint8_t>>& tensor_data_in_order);
  // The same bytes write_all() would write, in memory (tests, fuzzing).
  Expected<std::vector<uint8_t>> to_bytes(const std::vector<std::span<const uint8_t>>& tensor_data_in_order);

 private:
  // Validates everything declared, assigns tensor offsets and returns the header, metadata
  // and tensor directory padded to the start of the data section.
  Expected<std::vector<uint8_t>> layout();
  Status check_tensor_data(size_t index, std::string_view name, size_t size) const;

  uint32_t alignment_ = GgufFile::kDefaultAlignment;
  std::vector<GgufMetadataEntry> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::optional<AtomicFile> file_;
  size_t next_tensor_ = 0;
  uint64_t next_tensor_written_ = 0;  // bytes of tensors_[next_tensor_] written so far
  uint64_t data_start_ = 0;
};

// The bytes a writer gives a parsed file's metadata and tensors (same alignment, same order):
// equal to the file itself for any file Kipp wrote. Tools that edit GGUF files start here.
Expected<std::vector<uint8_t>> reserialize_gguf(const GgufFile& file);

}  // namespace kipp
