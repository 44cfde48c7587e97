// GgufFile::parse: a validating GGUF v3 parser for untrusted bytes (an mmap of a file).
//
// Every read is bounds-checked against the bytes left, and every count read from the file is
// compared with what those bytes could possibly hold before anything is allocated, so hostile
// input costs at most memory proportional to its own size. Errors name where they happened
// ("GGUF metadata key #5 ('x')", "GGUF tensor 'blk.0.attn_q.weight'"), the field, and the
// expected and found values.
#include "format/gguf.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <type_traits>

namespace kipp {
namespace {

// The smallest encodings, used to reject counts the remaining bytes cannot hold.
constexpr uint64_t kMinStringBytes = 8;                          // u64 length, no bytes
constexpr uint64_t kMinArrayBytes = 4 + 8;                       // element type, length
constexpr uint64_t kMinKeyValueBytes = 8 + 1 + 4 + 1;            // key length, 1-byte key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, 1 dim, type, offset
constexpr uint32_t kMaxValueType = static_cast<uint32_t>(GgufValueType::FLOAT64);
constexpr size_t kMaxNameInMessage = 64;

// A name from the file, made safe and short for an error message.
std::string printable(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMaxNameInMessage; ++i) {
    const auto byte = static_cast<uint8_t>(text[i]);
    if (byte < 0x20 || byte == 0x7f || byte == '\'' || byte == '\\') {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[byte >> 4];
      out += hex[byte & 15];
    } else {
      out += static_cast<char>(byte);
    }
  }
  if (text.size() > kMaxNameInMessage) out += "...";
  return out;
}

std::string hex32(uint32_t value) {
  static const char* hex = "0123456789abcdef";
  std::string out = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) out += hex[(value >> shift) & 15u];
  return out;
}

Error prefixed(const std::string& context, const Error& error) { return make_error(context + ": " + error.message); }

// A little-endian reader over the file's bytes. Failures name `field` only; callers add where.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t position() const { return position_; }
  uint64_t remaining() const { return bytes_.size() - position_; }

  // `field` + `suffix` name the value in an error; two parts so that the common, successful
  // path builds no string.
  template <typename T>
  Expected<T> read(std::string_view field, std::string_view suffix = {}) {
    static_assert(std::is_unsigned_v<T>);
    if (remaining() < sizeof(T)) {
      return make_error(std::string(field) + std::string(suffix) + " needs " + std::to_string(sizeof(T)) +
                        " bytes but only " + std::to_string(remaining()) + " are left in the file");
    }
    T value = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      value = static_cast<T>(value | static_cast<T>(static_cast<T>(bytes_[position_ + i]) << (8 * i)));
    }
    position_ += sizeof(T);
    return value;
  }

  // A GGUF string: u64 length, then that many bytes (no terminator, any content).
  Expected<std::string> read_string(std::string_view field) {
    KIPP_ASSIGN_OR_RETURN(const uint64_t length, read<uint64_t>(field, " length"));
    if (length > remaining()) {
      return make_error(std::string(field) + " length " + std::to_string(length) + " exceeds the " +
                        std::to_string(remaining()) + " bytes left in the file");
    }
    std::string out(reinterpret_cast<const char*>(bytes_.data() + position_), static_cast<size_t>(length));
    position_ += length;
    return out;
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t position_ = 0;
};

Expected<GgufValueType> read_value_type(Cursor& cursor, std::string_view field) {
  KIPP_ASSIGN_OR_RETURN(const uint32_t id, cursor.read<uint32_t>(field));
  if (id > kMaxValueType) {
    return make_error(std::string(field) + " " + std::to_string(id) + " is unknown (expected 0 to " +
                      std::to_string(kMaxValueType) + ")");
  }
  return static_cast<GgufValueType>(id);
}

Expected<GgufValue> read_value(Cursor& cursor, GgufValueType type, int depth);

// An array's payload: element type, u64 length, elements. `depth` counts this array.
Expected<GgufValue> read_array(Cursor& cursor, int depth) {
  KIPP_ASSIGN_OR_RETURN(const GgufValueType element_type, read_value_type(cursor, "array element type"));
  if (element_type == GgufValueType::ARRAY && depth >= GgufFile::kMaxArrayDepth) {
    return make_error("arrays are nested deeper than " + std::to_string(GgufFile::kMaxArrayDepth) + " levels");
  }
  KIPP_ASSIGN_OR_RETURN(const uint64_t length, cursor.read<uint64_t>("array length"));
  uint64_t min_element_bytes = gguf_scalar_size(element_type);
  if (element_type == GgufValueType::STRING) min_element_bytes = kMinStringBytes;
  if (element_type == GgufValueType::ARRAY) min_element_bytes = kMinArrayBytes;
  if (length > cursor.remaining() / min_element_bytes) {
    return make_error("array length " + std::to_string(length) + " exceeds what the " +
                      std::to_string(cursor.remaining()) + " bytes left in the file can hold (" +
                      std::to_string(min_element_bytes) + " or more bytes per " +
                      std::string(gguf_value_type_name(element_type)) + ")");
  }
  std::vector<GgufValue> items;
  items.reserve(static_cast<size_t>(length));
  for (uint64_t i = 0; i < length; ++i) {
    auto item = read_value(cursor, element_type, depth);
    if (!item.ok()) return prefixed("array element #" + std::to_string(i), item.error());
    items.push_back(std::move(item).value());
  }
  return GgufValue::array(element_type, std::move(items));
}

// One value of a known `type`; `depth` is the number of arrays around it.
Expected<GgufValue> read_value(Cursor& cursor, GgufValueType type, int depth) {
  switch (type) {
    case GgufValueType::UINT8: {
      KIPP_ASSIGN_OR_RETURN(const uint8_t v, cursor.read<uint8_t>("u8 value"));
      return GgufValue::u8(v);
    }
    case GgufValueType::INT8: {
      KIPP_ASSIGN_OR_RETURN(const uint8_t v, cursor.read<uint8_t>("i8 value"));
      return GgufValue::i8(std::bit_cast<int8_t>(v));
    }
    case GgufValueType::UINT16: {
      KIPP_ASSIGN_OR_RETURN(const uint16_t v, cursor.read<uint16_t>("u16 value"));
      return GgufValue::u16(v);
    }
    case GgufValueType::INT16: {
      KIPP_ASSIGN_OR_RETURN(const uint16_t v, cursor.read<uint16_t>("i16 value"));
      return GgufValue::i16(std::bit_cast<int16_t>(v));
    }
    case GgufValueType::UINT32: {
      KIPP_ASSIGN_OR_RETURN(const uint32_t v, cursor.read<uint32_t>("u32 value"));
      return GgufValue::u32(v);
    }
    case GgufValueType::INT32: {
      KIPP_ASSIGN_OR_RETURN(const uint32_t v, cursor.read<uint32_t>("i32 value"));
      return GgufValue::i32(std::bit_cast<int32_t>(v));
    }
    case GgufValueType::UINT64: {
      KIPP_ASSIGN_OR_RETURN(const uint64_t v, cursor.read<uint64_t>("u64 value"));
      return GgufValue::u64(v);
    }
    case GgufValueType::INT64: {
      KIPP_ASSIGN_OR_RETURN(const uint64_t v, cursor.read<uint64_t>("i64 value"));
      return GgufValue::i64(std::bit_cast<int64_t>(v));
    }
    case GgufValueType::FLOAT32: {
      KIPP_ASSIGN_OR_RETURN(const uint32_t v, cursor.read<uint32_t>("f32 value"));
      return GgufValue::f32(std::bit_cast<float>(v));
    }
    case GgufValueType::FLOAT64: {
      KIPP_ASSIGN_OR_RETURN(const uint64_t v, cursor.read<uint64_t>("f64 value"));
      return GgufValue::f64(std::bit_cast<double>(v));
    }
    case GgufValueType::BOOL: {
      KIPP_ASSIGN_OR_RETURN(const uint8_t v, cursor.read<uint8_t>("bool value"));
      // The spec calls anything but 0 and 1 invalid; accepting it would not round-trip.
      if (v > 1) return make_error("bool value " + std::to_string(v) + " is invalid (expected 0 or 1)");
      return GgufValue::boolean(v == 1);
    }
    case GgufValueType::STRING: {
      KIPP_ASSIGN_OR_RETURN(std::string v, cursor.read_string("string"));
      return GgufValue::string(std::move(v));
    }
    case GgufValueType::ARRAY: return read_array(cursor, depth + 1);
  }
  return make_error("value type " + std::to_string(static_cast<uint32_t>(type)) + " is unknown");
}

bool is_power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

// A count from the header, checked against the least space each item needs.
Status check_count(std::string_view field, uint64_t count, uint64_t min_item_bytes, uint64_t remaining,
                   std::string_view item) {
  if (count <= remaining / min_item_bytes) return ok_status();
  return make_error("GGUF header: " + std::string(field) + " " + std::to_string(count) + " is impossible: each " +
                    std::string(item) + " needs at least " + std::to_string(min_item_bytes) + " bytes and only " +
                    std::to_string(remaining) + " bytes are left in the file");
}

// Reads one tensor directory entry (not yet checked against the data section).
Expected<GgufTensorInfo> read_tensor_info(Cursor& cursor, uint64_t index, uint32_t alignment) {
  const std::string where = "GGUF tensor #" + std::to_string(index);
  auto name = cursor.read_string("name");
  if (!name.ok()) return prefixed(where, name.error());
  if (name->empty()) return make_error(where + ": name is empty (expected 1 to 64 bytes)");
  const std::string context = "GGUF tensor '" + printable(*name) + "'";
  if (name->size() > GgufFile::kMaxTensorNameBytes) {
    return make_error(context + ": name length " + std::to_string(name->size()) + " exceeds the GGUF limit of " +
                      std::to_string(GgufFile::kMaxTensorNameBytes) + " bytes");
  }

  GgufTensorInfo info;
  info.name = std::move(name).value();
  auto n_dims = cursor.read<uint32_t>("n_dims");
  if (!n_dims.ok()) return prefixed(context, n_dims.error());
  if (*n_dims < 1 || *n_dims > GgufFile::kMaxDims) {
    return make_error(context + ": n_dims " + std::to_string(*n_dims) + " is out of range (expected 1 to " +
                      std::to_string(GgufFile::kMaxDims) + ")");
  }
  uint64_t elements = 1;
  for (uint32_t d = 0; d < *n_dims; ++d) {
    auto dim = cursor.read<uint64_t>("dimension " + std::to_string(d));
    if (!dim.ok()) return prefixed(context, dim.error());
    // ggml stores dimensions as int64, so larger values would turn negative there.
    if (*dim < 1 || *dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return make_error(context + ": dimension " + std::to_string(d) + " is " + std::to_string(*dim) +
                        " (expected 1 to 2^63-1)");
    }
    if (elements > std::numeric_limits<uint64_t>::max() / *dim) {
      return make_error(context + ": the element count (product of the dimensions) overflows 64 bits");
    }
    elements *= *dim;
    info.dims.push_back(*dim);
  }

  auto type_id = cursor.read<uint32_t>("type");
  if (!type_id.ok()) return prefixed(context, type_id.error());
  const auto traits = ggml_type_traits(*type_id);
  if (!traits) {
    return make_error(context + ": ggml type " + std::to_string(*type_id) +
                      " is unknown (expected one of f32=0, f16=1, q4_0=2, q4_1=3, q8_0=8, bf16=30)");
  }
  info.type = traits->type;
  // Blocks never straddle rows in ggml, so the row length (dimension 0) must be whole blocks.
  if (info.dims[0] % traits->block_elements != 0) {
    return make_error(context + ": dimension 0 (" + std::to_string(info.dims[0]) + ") is not a multiple of the " +
                      std::string(traits->name) + " block size " + std::to_string(traits->block_elements));
  }
  const auto size = ggml_tensor_bytes(info.type, elements);
  if (!size) {
    return make_error(context + ": the byte size of " + std::to_string(elements) + " elements overflows 64 bits");
  }
  info.size_bytes = *size;

  auto offset = cursor.read<uint64_t>("offset");
  if (!offset.ok()) return prefixed(context, offset.error());
  if (*offset % alignment != 0) {
    return make_error(context + ": offset " + std::to_string(*offset) + " is not a multiple of the alignment " +
                      std::to_string(alignment));
  }
  info.offset = *offset;
  return info;
}

// `general.alignment` when present: a u32 power of two.
Expected<uint32_t> alignment_of(const GgufFile& file) {
  const GgufValue* value = file.find(GgufFile::kAlignmentKey);
  if (value == nullptr) return GgufFile::kDefaultAlignment;
  const std::string context = "GGUF metadata '" + std::string(GgufFile::kAlignmentKey) + "'";
  if (value->type() != GgufValueType::UINT32) {
    return make_error(context + ": type " + std::string(gguf_value_type_name(value->type())) +
                      " is not allowed (expected u32)");
  }
  const uint64_t alignment = *value->as_uint();
  if (!is_power_of_two(alignment)) {
    return make_error(context + ": " + std::to_string(alignment) + " is not a power of two");
  }
  return static_cast<uint32_t>(alignment);
}

// Each tensor's data lies inside the data section (`data_bytes` long) and overlaps no other.
Status check_tensor_data(const std::vector<GgufTensorInfo>& tensors, uint64_t data_bytes) {
  for (const GgufTensorInfo& info : tensors) {
    if (info.offset > data_bytes || info.size_bytes > data_bytes - info.offset) {
      return make_error("GGUF tensor '" + printable(info.name) + "': data at offset " + std::to_string(info.offset) +
                        " with " + std::to_string(info.size_bytes) + " bytes ends past the data section's " +
                        std::to_string(data_bytes) + " bytes");
    }
  }

  // Tensors may be listed in any order; sorted by offset, each must end before the next.
  // (Stable, so the message for equal offsets names the later-listed tensor.)
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(tensors.size());
  for (const GgufTensorInfo& info : tensors) by_offset.push_back(&info);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& before = *by_offset[i - 1];
    const GgufTensorInfo& after = *by_offset[i];
    if (after.offset < before.offset + before.size_bytes) {
      return make_error("GGUF tensor '" + printable(after.name) + "': data [" + std::to_string(after.offset) + ", " +
                        std::to_string(after.offset + after.size_bytes) + ") overlaps tensor '" +
                        printable(before.name) + "' [" + std::to_string(before.offset) + ", " +
                        std::to_string(before.offset + before.size_bytes) + ")");
    }
  }
  return ok_status();
}

}  // namespace

uint64_t GgufTensorInfo::element_count() const {
  uint64_t count = 1;
  for (uint64_t dim : dims) count *= dim;
  return count;
}

Expected<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes) {
  GgufFile file;
  file.bytes_ = bytes;
  Cursor cursor(bytes);

  auto magic = cursor.read<uint32_t>("magic");
  if (!magic.ok()) return prefixed("GGUF header", magic.error());
  if (*magic != kMagic) {
    return make_error("GGUF header: magic " + hex32(*magic) + " is not \"GGUF\" (expected " + hex32(kMagic) + ")");
  }
  auto version = cursor.read<uint32_t>("version");
  if (!version.ok()) return prefixed("GGUF header", version.error());
  if (*version != kVersion) {
    return make_error("GGUF header: version " + std::to_string(*version) + " is not supported (expected " +
                      std::to_string(kVersion) + ")");
  }
  file.version_ = *version;
  auto tensor_count = cursor.read<uint64_t>("tensor_count");
  if (!tensor_count.ok()) return prefixed("GGUF header", tensor_count.error());
  auto kv_count = cursor.read<uint64_t>("kv_count");
  if (!kv_count.ok()) return prefixed("GGUF header", kv_count.error());
  KIPP_RETURN_IF_ERROR(check_count("kv_count", *kv_count, kMinKeyValueBytes, cursor.remaining(), "key/value pair"));
  KIPP_RETURN_IF_ERROR(
      check_count("tensor_count", *tensor_count, kMinTensorInfoBytes, cursor.remaining(), "tensor info"));

  file.metadata_.reserve(static_cast<size_t>(*kv_count));
  for (uint64_t i = 0; i < *kv_count; ++i) {
    const std::string where = "GGUF metadata key #" + std::to_string(i);
    auto key = cursor.read_string("key");
    if (!key.ok()) return prefixed(where, key.error());
    if (key->empty()) return make_error(where + ": key is empty (expected a non-empty string)");
    const std::string context = where + " ('" + printable(*key) + "')";
    if (const auto it = file.metadata_index_.find(*key); it != file.metadata_index_.end()) {
      return make_error(context + ": duplicate key (first defined as key #" + std::to_string(it->second) + ")");
    }
    auto type = read_value_type(cursor, "value type");
    if (!type.ok()) return prefixed(context, type.error());
    auto value = read_value(cursor, *type, 0);
    if (!value.ok()) return prefixed(context, value.error());
    file.metadata_index_.emplace(*key, file.metadata_.size());
    file.metadata_.push_back({std::move(key).value(), std::move(value).value()});
  }
  KIPP_ASSIGN_OR_RETURN(file.alignment_, alignment_of(file));

  KIPP_RETURN_IF_ERROR(
      check_count("tensor_count", *tensor_count, kMinTensorInfoBytes, cursor.remaining(), "tensor info"));
  file.tensors_.reserve(static_cast<size_t>(*tensor_count));
  for (uint64_t i = 0; i < *tensor_count; ++i) {
    KIPP_ASSIGN_OR_RETURN(GgufTensorInfo info, read_tensor_info(cursor, i, file.alignment_));
    if (const auto it = file.tensor_index_.find(info.name); it != file.tensor_index_.end()) {
      return make_error("GGUF tensor '" + printable(info.name) + "': duplicate name (first defined as tensor #" +
                        std::to_string(it->second) + ")");
    }
    file.tensor_index_.emplace(info.name, file.tensors_.size());
    file.tensors_.push_back(std::move(info));
  }

  // The data section starts at the next multiple of the alignment. Without tensors a file
  // may end before it (nothing is read there).
  const uint64_t end_of_directory = cursor.position();
  file.data_offset_ = (end_of_directory + file.alignment_ - 1) / file.alignment_ * file.alignment_;
  if (file.tensors_.empty()) return file;
  if (file.data_offset_ > bytes.size()) {
    return make_error("GGUF data section: starts at byte " + std::to_string(file.data_offset_) +
                      " (the tensor directory ends at " + std::to_string(end_of_directory) + ", aligned to " +
                      std::to_string(file.alignment_) + ") but the file has only " + std::to_string(bytes.size()) +
                      " bytes");
  }
  KIPP_RETURN_IF_ERROR(check_tensor_data(file.tensors_, bytes.size() - file.data_offset_));
  return file;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> GgufFile::tensor_data(const GgufTensorInfo& tensor) const {
  // parse() proved this for the file's own tensors; a foreign one gets an empty span.
  if (data_offset_ > bytes_.size()) return {};
  const uint64_t data_bytes = bytes_.size() - data_offset_;
  if (tensor.offset > data_bytes || tensor.size_bytes > data_bytes - tensor.offset) return {};
  return bytes_.subspan(static_cast<size_t>(data_offset_ + tensor.offset), static_cast<size_t>(tensor.size_bytes));
}

}  // namespace kipp
