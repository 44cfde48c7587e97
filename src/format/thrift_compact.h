// A reader for the Thrift compact protocol, the encoding of Parquet's footer (FileMetaData) and
// page headers. Written from the protocol's published description: field headers carry a
// field-id delta and a type in one byte, integers are zigzag varints, strings a varint length.
//
// Errors are sticky: the first problem (running off the end, a bad type, nesting deeper than a
// limit) is recorded, every later read returns zero / empty / STOP, and the caller checks
// `ok()` once after parsing a struct. Every length is checked against the bytes left, so no
// input makes it read out of bounds or allocate more than the input's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kipp::thrift {

// Compact protocol type ids (the low nibble of a field header or a list header).
enum class CompactType : uint8_t {
  Stop = 0,
  BoolTrue = 1,
  BoolFalse = 2,
  Byte = 3,
  I16 = 4,
  I32 = 5,
  I64 = 6,
  Double = 7,
  Binary = 8,
  List = 9,
  Set = 10,
  Map = 11,
  Struct = 12,
  Uuid = 13,
};

struct FieldHeader {
  int16_t id = 0;
  CompactType type = CompactType::Stop;  // Stop: the struct has no more fields
};

struct ListHeader {
  CompactType element = CompactType::Stop;
  uint32_t size = 0;  // never more than the bytes left (every element takes at least one)
};

// Zigzag-encoded signed integer (the compact protocol's and Parquet's DELTA encodings').
int64_t unzigzag(uint64_t n);
// An unsigned LEB128 varint of at most 64 bits from [p, end), advancing p; false when truncated
// or longer than 64 bits.
bool read_uleb128(const uint8_t*& p, const uint8_t* end, uint64_t& value);

class CompactReader {
 public:
  // Nesting deeper than this (structs, lists, maps) is an error, so hostile input cannot
  // exhaust the stack.
  static constexpr int kMaxDepth = 64;

  explicit CompactReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t position() const { return pos_; }

  // Structs: begin_struct(), then next_field() until it returns Stop (reading or skip()ping
  // each field's value), then end_struct().
  void begin_struct();
  void end_struct();
  FieldHeader next_field();

  // Values. A boolean field carries its value in the field header's type, so read_bool takes
  // that type; inside lists a boolean is one byte.
  bool read_bool(CompactType field_type);
  int8_t read_byte();
  int16_t read_i16();
  int32_t read_i32();
  int64_t read_i64();
  double read_double();
  std::string_view read_binary();  // a view into the input
  ListHeader read_list_header();   // lists and sets

  // Skips one value of `type` (recursively for containers), for fields this reader does not
  // know: files from newer writers still parse.
  void skip(CompactType type);

  // Records an error found by the caller (a wrong field type, a missing required field), so
  // there is one place to look.
  void fail(std::string message);

 private:
  uint64_t read_varint();
  uint8_t read_u8();
  bool take(size_t n);  // fails when fewer than n bytes are left

  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
  std::string error_;
  std::vector<int16_t> last_field_ids_;  // one per open struct
  int16_t last_field_id_ = 0;
  int depth_ = 0;
};

// Reads a value of the expected type, failing the reader when the field's type differs
// (types from a corrupted footer); these keep the struct parsers short.
int32_t read_i32_field(CompactReader& reader, const FieldHeader& field, const char* name);
int64_t read_i64_field(CompactReader& reader, const FieldHeader& field, const char* name);
std::string_view read_binary_field(CompactReader& reader, const FieldHeader& field, const char* name);
bool read_bool_field(CompactReader& reader, const FieldHeader& field, const char* name);
// The header of a list field; size 0 when the field is not a list.
ListHeader read_list_field(CompactReader& reader, const FieldHeader& field, const char* name);

}  // namespace kipp::thrift
