// GgufValue: construction, typed access, equality and the `kipp inspect` rendering.
#include "format/gguf.h"

#include <bit>
#include <charconv>
#include <limits>
#include <system_error>

namespace kipp {
namespace {

constexpr size_t kDescribeStringBytes = 60;  // strings longer than this are cut
constexpr size_t kDescribeArrayItems = 4;    // items shown before "..."

bool is_integer(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::UINT64:
    case GgufValueType::INT64: return true;
    default: return false;
  }
}

bool is_signed(GgufValueType type) {
  return type == GgufValueType::INT8 || type == GgufValueType::INT16 || type == GgufValueType::INT32 ||
         type == GgufValueType::INT64;
}

// Shortest text that reads back to the same value: plain digits when that stays short
// ("1000000", "0.000001"), scientific otherwise ("1e-20", "3.4028235e+38").
template <typename Float>
std::string format_float(Float value) {
  constexpr size_t kMaxFixedChars = 12;
  char buffer[400];  // fixed notation of the largest double needs 309 digits
  const auto fixed = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed);
  if (fixed.ec == std::errc() && static_cast<size_t>(fixed.ptr - buffer) <= kMaxFixedChars) {
    return std::string(buffer, fixed.ptr);
  }
  const auto shortest = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, shortest.ptr);
}

// Quotes and escapes `text`; cuts it near `limit` bytes (never inside a UTF-8 sequence) and
// then says how long it was.
std::string quote(const std::string& text, size_t limit) {
  size_t cut = text.size();
  if (cut > limit) {
    cut = limit;
    while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xc0u) == 0x80u) --cut;
  }
  std::string out = "\"";
  for (size_t i = 0; i < cut; ++i) {
    const auto byte = static_cast<uint8_t>(text[i]);
    switch (byte) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          static const char* hex = "0123456789abcdef";
          out += "\\x";
          out += hex[byte >> 4];
          out += hex[byte & 15];
        } else {
          out += static_cast<char>(byte);
        }
    }
  }
  out += '"';
  if (cut < text.size()) {
    out.insert(out.size() - 1, "...");
    out += " (" + std::to_string(text.size()) + " bytes)";
  }
  return out;
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8: return "u8";
    case GgufValueType::INT8: return "i8";
    case GgufValueType::UINT16: return "u16";
    case GgufValueType::INT16: return "i16";
    case GgufValueType::UINT32: return "u32";
    case GgufValueType::INT32: return "i32";
    case GgufValueType::FLOAT32: return "f32";
    case GgufValueType::BOOL: return "bool";
    case GgufValueType::STRING: return "string";
    case GgufValueType::ARRAY: return "array";
    case GgufValueType::UINT64: return "u64";
    case GgufValueType::INT64: return "i64";
    case GgufValueType::FLOAT64: return "f64";
  }
  return "unknown";
}

size_t gguf_scalar_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::BOOL: return 1;
    case GgufValueType::UINT16:
    case GgufValueType::INT16: return 2;
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::FLOAT32: return 4;
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
    case GgufValueType::FLOAT64: return 8;
    case GgufValueType::STRING:
    case GgufValueType::ARRAY: return 0;
  }
  return 0;
}

GgufValue GgufValue::scalar(GgufValueType type, uint64_t bits) {
  GgufValue out;
  out.type_ = type;
  out.bits_ = bits;
  return out;
}

// Signed values are stored sign-extended, so as_int() needs no per-type code.
GgufValue GgufValue::u8(uint8_t v) { return scalar(GgufValueType::UINT8, v); }
GgufValue GgufValue::i8(int8_t v) { return scalar(GgufValueType::INT8, static_cast<uint64_t>(int64_t{v})); }
GgufValue GgufValue::u16(uint16_t v) { return scalar(GgufValueType::UINT16, v); }
GgufValue GgufValue::i16(int16_t v) { return scalar(GgufValueType::INT16, static_cast<uint64_t>(int64_t{v})); }
GgufValue GgufValue::u32(uint32_t v) { return scalar(GgufValueType::UINT32, v); }
GgufValue GgufValue::i32(int32_t v) { return scalar(GgufValueType::INT32, static_cast<uint64_t>(int64_t{v})); }
GgufValue GgufValue::u64(uint64_t v) { return scalar(GgufValueType::UINT64, v); }
GgufValue GgufValue::i64(int64_t v) { return scalar(GgufValueType::INT64, static_cast<uint64_t>(v)); }
GgufValue GgufValue::f32(float v) { return scalar(GgufValueType::FLOAT32, std::bit_cast<uint32_t>(v)); }
GgufValue GgufValue::f64(double v) { return scalar(GgufValueType::FLOAT64, std::bit_cast<uint64_t>(v)); }
GgufValue GgufValue::boolean(bool v) { return scalar(GgufValueType::BOOL, v ? 1 : 0); }

GgufValue GgufValue::string(std::string v) {
  GgufValue out;
  out.type_ = GgufValueType::STRING;
  out.string_ = std::move(v);
  return out;
}

GgufValue GgufValue::array(GgufValueType element_type, std::vector<GgufValue> items) {
  GgufValue out;
  out.type_ = GgufValueType::ARRAY;
  out.array_type_ = element_type;
  out.items_ = std::make_shared<const std::vector<GgufValue>>(std::move(items));
  return out;
}

GgufValue GgufValue::string_array(std::vector<std::string> items) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (auto& item : items) values.push_back(string(std::move(item)));
  return array(GgufValueType::STRING, std::move(values));
}

GgufValue GgufValue::i32_array(const std::vector<int32_t>& items) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (int32_t item : items) values.push_back(i32(item));
  return array(GgufValueType::INT32, std::move(values));
}

GgufValue GgufValue::u32_array(const std::vector<uint32_t>& items) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (uint32_t item : items) values.push_back(u32(item));
  return array(GgufValueType::UINT32, std::move(values));
}

GgufValue GgufValue::f32_array(const std::vector<float>& items) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (float item : items) values.push_back(f32(item));
  return array(GgufValueType::FLOAT32, std::move(values));
}

std::optional<uint64_t> GgufValue::as_uint() const {
  if (!is_integer(type_)) return std::nullopt;
  if (is_signed(type_) && static_cast<int64_t>(bits_) < 0) return std::nullopt;
  return bits_;
}

std::optional<int64_t> GgufValue::as_int() const {
  if (!is_integer(type_)) return std::nullopt;
  if (!is_signed(type_) && bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return std::nullopt;
  }
  return static_cast<int64_t>(bits_);
}

std::optional<double> GgufValue::as_float() const {
  if (type_ == GgufValueType::FLOAT32) return std::bit_cast<float>(static_cast<uint32_t>(bits_));
  if (type_ == GgufValueType::FLOAT64) return std::bit_cast<double>(bits_);
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (type_ != GgufValueType::BOOL) return std::nullopt;
  return bits_ != 0;
}

const std::string* GgufValue::as_string() const { return type_ == GgufValueType::STRING ? &string_ : nullptr; }

const std::vector<GgufValue>* GgufValue::as_array() const {
  return type_ == GgufValueType::ARRAY ? items_.get() : nullptr;
}

std::optional<std::vector<std::string>> GgufValue::as_string_array() const {
  if (type_ != GgufValueType::ARRAY || array_type_ != GgufValueType::STRING) return std::nullopt;
  std::vector<std::string> out;
  out.reserve(items_->size());
  for (const GgufValue& item : *items_) {
    // array() does not police its items; a mistyped item makes this not a string array.
    if (item.type_ != GgufValueType::STRING) return std::nullopt;
    out.push_back(item.string_);
  }
  return out;
}

std::string GgufValue::describe() const {
  switch (type_) {
    case GgufValueType::UINT8:
    case GgufValueType::UINT16:
    case GgufValueType::UINT32:
    case GgufValueType::UINT64: return std::to_string(bits_);
    case GgufValueType::INT8:
    case GgufValueType::INT16:
    case GgufValueType::INT32:
    case GgufValueType::INT64: return std::to_string(static_cast<int64_t>(bits_));
    case GgufValueType::FLOAT32: return format_float(std::bit_cast<float>(static_cast<uint32_t>(bits_)));
    case GgufValueType::FLOAT64: return format_float(std::bit_cast<double>(bits_));
    case GgufValueType::BOOL: return bits_ != 0 ? "true" : "false";
    case GgufValueType::STRING: return quote(string_, kDescribeStringBytes);
    case GgufValueType::ARRAY: break;
  }
  const std::vector<GgufValue>& items = *items_;
  std::string out = "[" + std::to_string(items.size()) + " x " + std::string(gguf_value_type_name(array_type_));
  // Nested arrays show only their size so the rendering stays short at any depth.
  if (array_type_ == GgufValueType::ARRAY || items.empty()) return out + "]";
  out += ": ";
  for (size_t i = 0; i < items.size() && i < kDescribeArrayItems; ++i) {
    if (i > 0) out += ", ";
    out += items[i].type_ == GgufValueType::ARRAY ? "[...]" : items[i].describe();
  }
  if (items.size() > kDescribeArrayItems) out += ", ...";
  return out + "]";
}

bool GgufValue::operator==(const GgufValue& other) const {
  if (type_ != other.type_ || bits_ != other.bits_ || string_ != other.string_) return false;
  if (type_ != GgufValueType::ARRAY) return true;
  return array_type_ == other.array_type_ && *items_ == *other.items_;
}

}  // namespace kipp
