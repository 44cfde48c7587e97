#include "format/thrift_compact.h"

#include <bit>
#include <cstring>

namespace kipp::thrift {

namespace {

const char* type_name(CompactType type) {
  switch (type) {
    case CompactType::Stop: return "stop";
    case CompactType::BoolTrue:
    case CompactType::BoolFalse: return "bool";
    case CompactType::Byte: return "byte";
    case CompactType::I16: return "i16";
    case CompactType::I32: return "i32";
    case CompactType::I64: return "i64";
    case CompactType::Double: return "double";
    case CompactType::Binary: return "binary";
    case CompactType::List: return "list";
    case CompactType::Set: return "set";
    case CompactType::Map: return "map";
    case CompactType::Struct: return "struct";
    case CompactType::Uuid: return "uuid";
  }
  return "unknown";
}

bool valid_type(uint8_t type) { return type <= static_cast<uint8_t>(CompactType::Uuid); }

}  // namespace

void CompactReader::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
  pos_ = bytes_.size();  // every later read sees the end
}

bool CompactReader::take(size_t n) {
  if (!ok()) return false;
  if (n > bytes_.size() - pos_) {
    fail("unexpected end of data at byte " + std::to_string(pos_) + " (needs " + std::to_string(n) + " more, " +
         std::to_string(bytes_.size() - pos_) + " left)");
    return false;
  }
  return true;
}

uint8_t CompactReader::read_u8() {
  if (!take(1)) return 0;
  return bytes_[pos_++];
}

int64_t unzigzag(uint64_t n) { return static_cast<int64_t>(n >> 1) ^ -static_cast<int64_t>(n & 1); }

bool read_uleb128(const uint8_t*& p, const uint8_t* end, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const uint8_t byte = *p++;
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return shift < 63 || byte <= 1;
  }
  return false;
}

uint64_t CompactReader::read_varint() {
  if (!ok()) return 0;
  const uint8_t* p = bytes_.data() + pos_;
  const uint8_t* end = bytes_.data() + bytes_.size();
  uint64_t value = 0;
  if (!read_uleb128(p, end, value)) {
    if (p == end) {
      pos_ = bytes_.size();
      take(1);  // reports the end of the data
    } else {
      fail("varint longer than 64 bits at byte " + std::to_string(pos_));
    }
    return 0;
  }
  pos_ = size_t(p - bytes_.data());
  return value;
}

void CompactReader::begin_struct() {
  if (!ok()) return;
  if (++depth_ > kMaxDepth) {
    fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    return;
  }
  last_field_ids_.push_back(last_field_id_);
  last_field_id_ = 0;
}

void CompactReader::end_struct() {
  if (last_field_ids_.empty()) return;
  last_field_id_ = last_field_ids_.back();
  last_field_ids_.pop_back();
  --depth_;
}

FieldHeader CompactReader::next_field() {
  FieldHeader field;
  const uint8_t byte = read_u8();
  if (!ok() || byte == 0) return field;
  const uint8_t type = byte & 0x0f;
  if (!valid_type(type) || type == 0) {
    fail("invalid field type " + std::to_string(type) + " at byte " + std::to_string(pos_ - 1));
    return field;
  }
  const int delta = byte >> 4;
  int64_t id = 0;
  if (delta == 0) {
    id = unzigzag(read_varint());
  } else {
    id = static_cast<int64_t>(last_field_id_) + delta;
  }
  if (!ok()) return field;
  if (id < INT16_MIN || id > INT16_MAX) {
    fail("field id " + std::to_string(id) + " out of range at byte " + std::to_string(pos_));
    return field;
  }
  last_field_id_ = static_cast<int16_t>(id);
  field.id = last_field_id_;
  field.type = static_cast<CompactType>(type);
  return field;
}

bool CompactReader::read_bool(CompactType field_type) {
  if (field_type == CompactType::BoolTrue) return true;
  if (field_type == CompactType::BoolFalse) return false;
  // Inside a list: one byte (writers use 1 for true; 0 or 2 for false).
  return read_u8() == 1;
}

int8_t CompactReader::read_byte() { return static_cast<int8_t>(read_u8()); }

int16_t CompactReader::read_i16() {
  const int64_t value = unzigzag(read_varint());
  if (value < INT16_MIN || value > INT16_MAX) {
    fail("i16 value " + std::to_string(value) + " out of range at byte " + std::to_string(pos_));
    return 0;
  }
  return static_cast<int16_t>(value);
}

int32_t CompactReader::read_i32() {
  const int64_t value = unzigzag(read_varint());
  if (value < INT32_MIN || value > INT32_MAX) {
    fail("i32 value " + std::to_string(value) + " out of range at byte " + std::to_string(pos_));
    return 0;
  }
  return static_cast<int32_t>(value);
}

int64_t CompactReader::read_i64() { return unzigzag(read_varint()); }

double CompactReader::read_double() {
  if (!take(8)) return 0.0;
  uint64_t bits = 0;
  for (int i = 7; i >= 0; --i) bits = (bits << 8) | bytes_[pos_ + static_cast<size_t>(i)];
  pos_ += 8;
  return std::bit_cast<double>(bits);
}

std::string_view CompactReader::read_binary() {
  const uint64_t size = read_varint();
  if (!ok()) return {};
  if (size > bytes_.size() - pos_) {
    fail("string of " + std::to_string(size) + " bytes at byte " + std::to_string(pos_) + " runs past the end (" +
         std::to_string(bytes_.size() - pos_) + " bytes left)");
    return {};
  }
  std::string_view text(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(size));
  pos_ += static_cast<size_t>(size);
  return text;
}

ListHeader CompactReader::read_list_header() {
  ListHeader header;
  const uint8_t byte = read_u8();
  if (!ok()) return header;
  const uint8_t element = byte & 0x0f;
  uint64_t size = byte >> 4;
  if (size == 15) size = read_varint();
  if (!ok()) return header;
  if (!valid_type(element) || element == 0) {
    fail("invalid list element type " + std::to_string(element) + " at byte " + std::to_string(pos_));
    return header;
  }
  // Every element takes at least one byte, so a longer list cannot fit in what is left.
  if (size > bytes_.size() - pos_) {
    fail("list of " + std::to_string(size) + " elements at byte " + std::to_string(pos_) + " cannot fit in the " +
         std::to_string(bytes_.size() - pos_) + " bytes left");
    return header;
  }
  header.element = static_cast<CompactType>(element);
  header.size = static_cast<uint32_t>(size);
  return header;
}

void CompactReader::skip(CompactType type) {
  if (!ok()) return;
  switch (type) {
    case CompactType::Stop: fail("cannot skip a value of type stop"); return;
    case CompactType::BoolTrue:
    case CompactType::BoolFalse: return;  // the value is in the field header
    case CompactType::Byte: read_u8(); return;
    case CompactType::I16:
    case CompactType::I32:
    case CompactType::I64: read_varint(); return;
    case CompactType::Double:
      if (take(8)) pos_ += 8;
      return;
    case CompactType::Uuid:
      if (take(16)) pos_ += 16;
      return;
    case CompactType::Binary: read_binary(); return;
    case CompactType::List:
    case CompactType::Set: {
      if (++depth_ > kMaxDepth) {
        fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
        return;
      }
      const ListHeader header = read_list_header();
      for (uint32_t i = 0; i < header.size && ok(); ++i) {
        // Booleans inside a list are one byte each, not folded into a header.
        if (header.element == CompactType::BoolTrue || header.element == CompactType::BoolFalse) {
          read_u8();
        } else {
          skip(header.element);
        }
      }
      --depth_;
      return;
    }
    case CompactType::Map: {
      if (++depth_ > kMaxDepth) {
        fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
        return;
      }
      const uint64_t size = read_varint();
      if (size > 0 && ok()) {
        const uint8_t types = read_u8();
        const uint8_t key = types >> 4;
        const uint8_t value = types & 0x0f;
        if (!valid_type(key) || !valid_type(value) || key == 0 || value == 0) {
          fail("invalid map types at byte " + std::to_string(pos_));
        } else if (size > bytes_.size() - pos_) {
          fail("map of " + std::to_string(size) + " entries cannot fit in the bytes left");
        }
        for (uint64_t i = 0; i < size && ok(); ++i) {
          for (const uint8_t t : {key, value}) {
            const auto element = static_cast<CompactType>(t);
            if (element == CompactType::BoolTrue || element == CompactType::BoolFalse) {
              read_u8();
            } else {
              skip(element);
            }
          }
        }
      }
      --depth_;
      return;
    }
    case CompactType::Struct: {
      begin_struct();
      for (FieldHeader field = next_field(); ok() && field.type != CompactType::Stop; field = next_field()) {
        skip(field.type);
      }
      end_struct();
      return;
    }
  }
  fail("cannot skip unknown type " + std::to_string(static_cast<int>(type)));
}

namespace {

bool expect_type(CompactReader& reader, const FieldHeader& field, CompactType want, const char* name) {
  const bool is_bool = field.type == CompactType::BoolTrue || field.type == CompactType::BoolFalse;
  const bool want_bool = want == CompactType::BoolTrue || want == CompactType::BoolFalse;
  if (field.type == want || (is_bool && want_bool)) return true;
  reader.fail(std::string("field ") + name + " (id " + std::to_string(field.id) + ") has type " +
              type_name(field.type) + ", expected " + type_name(want));
  return false;
}

}  // namespace

int32_t read_i32_field(CompactReader& reader, const FieldHeader& field, const char* name) {
  return expect_type(reader, field, CompactType::I32, name) ? reader.read_i32() : 0;
}

int64_t read_i64_field(CompactReader& reader, const FieldHeader& field, const char* name) {
  return expect_type(reader, field, CompactType::I64, name) ? reader.read_i64() : 0;
}

std::string_view read_binary_field(CompactReader& reader, const FieldHeader& field, const char* name) {
  return expect_type(reader, field, CompactType::Binary, name) ? reader.read_binary() : std::string_view{};
}

bool read_bool_field(CompactReader& reader, const FieldHeader& field, const char* name) {
  return expect_type(reader, field, CompactType::BoolTrue, name) && reader.read_bool(field.type);
}

ListHeader read_list_field(CompactReader& reader, const FieldHeader& field, const char* name) {
  return expect_type(reader, field, CompactType::List, name) ? reader.read_list_header() : ListHeader{};
}

}  // namespace kipp::thrift
