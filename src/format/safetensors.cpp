#include "format/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <numeric>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/half.h"

namespace kipp {
namespace {

using Json = nlohmann::json;

// The reference implementation refuses headers above 100 MB; real headers are a few MB at most,
// and the limit keeps a hostile length field from making us parse gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::string_view kIndexName = "model.safetensors.index.json";
constexpr std::string_view kSingleName = "model.safetensors";

struct DtypeInfo {
  SafetensorsDtype dtype;
  std::string_view name;
  size_t bytes;
};

constexpr std::array<DtypeInfo, 13> kDtypes = {{
    {SafetensorsDtype::BOOL, "BOOL", 1},
    {SafetensorsDtype::U8, "U8", 1},
    {SafetensorsDtype::I8, "I8", 1},
    {SafetensorsDtype::U16, "U16", 2},
    {SafetensorsDtype::I16, "I16", 2},
    {SafetensorsDtype::F16, "F16", 2},
    {SafetensorsDtype::BF16, "BF16", 2},
    {SafetensorsDtype::U32, "U32", 4},
    {SafetensorsDtype::I32, "I32", 4},
    {SafetensorsDtype::F32, "F32", 4},
    {SafetensorsDtype::U64, "U64", 8},
    {SafetensorsDtype::I64, "I64", 8},
    {SafetensorsDtype::F64, "F64", 8},
}};

const DtypeInfo* find_dtype(std::string_view name) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string known_dtype_list() {
  std::string out;
  for (const DtypeInfo& info : kDtypes) {
    if (!out.empty()) out += ", ";
    out += info.name;
  }
  return out;
}

// a * b, or nullopt when it does not fit in 64 bits (a hostile shape must not wrap around
// into a small, plausible byte count).
std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return std::nullopt;
  return a * b;
}

std::optional<uint64_t> tensor_byte_count(SafetensorsDtype dtype, const std::vector<uint64_t>& shape) {
  std::optional<uint64_t> bytes = safetensors_dtype_bytes(dtype);
  for (uint64_t dim : shape) {
    if (!bytes) break;
    bytes = checked_mul(*bytes, dim);
  }
  return bytes;
}

std::string single_quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

uint64_t read_le_u64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

void append_le_u64(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

// A header array element that must be a non-negative integer (JSON has no unsigned type, so
// -1 or 1.5 or 1e30 arrive as other number kinds and are named in the error).
Expected<uint64_t> json_to_u64(const Json& value, const std::string& where) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  return make_error(where + ": expected a non-negative integer, found " + value.dump());
}

Expected<std::vector<uint64_t>> json_to_u64_array(const Json& value, const std::string& where) {
  if (!value.is_array()) return make_error(where + ": expected an array, found " + value.dump());
  std::vector<uint64_t> out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    KIPP_ASSIGN_OR_RETURN(uint64_t element, json_to_u64(value[i], where + "[" + std::to_string(i) + "]"));
    out.push_back(element);
  }
  return out;
}

// Parses one tensor entry {dtype, shape, data_offsets} and checks it against itself and the
// data section size. Unknown extra fields are ignored, as the reference reader does.
Expected<SafetensorsTensor> parse_tensor_entry(const std::string& name, const Json& entry, uint64_t data_size) {
  const std::string where = "tensor " + single_quoted(name);
  if (!entry.is_object()) return make_error(where + ": expected an object, found " + entry.dump());
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(field)) return make_error(where + ": missing field '" + field + "'");
  }
  SafetensorsTensor tensor;
  tensor.name = name;

  const Json& dtype = entry["dtype"];
  if (!dtype.is_string()) return make_error(where + ": field 'dtype': expected a string, found " + dtype.dump());
  const DtypeInfo* info = find_dtype(dtype.get_ref<const std::string&>());
  if (info == nullptr) {
    return make_error(where + ": field 'dtype': unsupported dtype " + dtype.dump() + " (expected one of " +
                      known_dtype_list() + ")");
  }
  tensor.dtype = info->dtype;

  KIPP_ASSIGN_OR_RETURN(tensor.shape, json_to_u64_array(entry["shape"], where + ": field 'shape'"));
  KIPP_ASSIGN_OR_RETURN(std::vector<uint64_t> offsets,
                        json_to_u64_array(entry["data_offsets"], where + ": field 'data_offsets'"));
  if (offsets.size() != 2) {
    return make_error(where + ": field 'data_offsets': expected [begin, end], found " + std::to_string(offsets.size()) +
                      " elements");
  }
  tensor.begin = offsets[0];
  tensor.end = offsets[1];
  if (tensor.begin > tensor.end) {
    return make_error(where + ": field 'data_offsets': begin " + std::to_string(tensor.begin) + " is after end " +
                      std::to_string(tensor.end));
  }
  if (tensor.end > data_size) {
    return make_error(where + ": field 'data_offsets': end " + std::to_string(tensor.end) +
                      " is beyond the data section of " + std::to_string(data_size) + " bytes");
  }
  const std::optional<uint64_t> expected_bytes = tensor_byte_count(tensor.dtype, tensor.shape);
  if (!expected_bytes) {
    return make_error(where + ": field 'shape': " + shape_text(tensor.shape) + " of " + std::string(info->name) +
                      " overflows 64-bit byte count");
  }
  const uint64_t found_bytes = tensor.end - tensor.begin;
  if (*expected_bytes != found_bytes) {
    return make_error(where + ": field 'shape': " + shape_text(tensor.shape) + " of " + std::string(info->name) +
                      " needs " + std::to_string(*expected_bytes) + " bytes but data_offsets [" +
                      std::to_string(tensor.begin) + ", " + std::to_string(tensor.end) + "] span " +
                      std::to_string(found_bytes));
  }
  return tensor;
}

Expected<std::map<std::string, std::string>> parse_metadata(const Json& value) {
  std::map<std::string, std::string> out;
  if (value.is_null()) return out;
  if (!value.is_object()) {
    return make_error("field '__metadata__': expected an object of strings, found " + value.dump());
  }
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return make_error("field '__metadata__': key " + single_quoted(key) + ": expected a string value, found " +
                        item.dump());
    }
    out.emplace(key, item.get<std::string>());
  }
  return out;
}

// The format requires the tensors to tile the data section exactly: sorted by offset, each
// one starts where the previous ended and the last ends at the end of the data.
Status check_coverage(std::vector<SafetensorsTensor>& tensors, uint64_t data_size) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const SafetensorsTensor* previous = nullptr;
  for (const SafetensorsTensor& tensor : tensors) {
    if (tensor.begin < cursor) {
      return make_error("tensors " + single_quoted(previous->name) + " and " + single_quoted(tensor.name) +
                        " overlap: " + single_quoted(tensor.name) + " field 'data_offsets' begins at " +
                        std::to_string(tensor.begin) + ", expected " + std::to_string(cursor) + " (the end of " +
                        single_quoted(previous->name) + ")");
    }
    if (tensor.begin > cursor) {
      return make_error("hole in the data section: bytes [" + std::to_string(cursor) + ", " +
                        std::to_string(tensor.begin) + ") belong to no tensor; tensor " + single_quoted(tensor.name) +
                        " field 'data_offsets' begins at " + std::to_string(tensor.begin) + ", expected " +
                        std::to_string(cursor));
    }
    cursor = tensor.end;
    previous = &tensor;
  }
  if (cursor != data_size) {
    return make_error("hole in the data section: bytes [" + std::to_string(cursor) + ", " + std::to_string(data_size) +
                      ") after the last tensor belong to no tensor (data section is " + std::to_string(data_size) +
                      " bytes, tensors end at " + std::to_string(cursor) + ")");
  }
  return ok_status();
}

// Parses the header text. JSON objects may legally repeat a key, but the format forbids it,
// and nlohmann keeps only the last one, so duplicates are caught while parsing.
Expected<Json> parse_header_json(std::string_view text) {
  std::string duplicate;
  std::set<std::string> seen;
  const Json::parser_callback_t on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(text.begin(), text.end(), on_event);
  } catch (const Json::exception& e) {
    return make_error(std::string("header is not valid JSON: ") + e.what());
  }
  if (!duplicate.empty()) return make_error("header names tensor " + single_quoted(duplicate) + " more than once");
  if (!root.is_object()) return make_error("header must be a JSON object, found " + std::string(root.type_name()));
  return root;
}

// A shard named by the index must be a plain file name inside the checkpoint folder; an
// index may not send the reader to arbitrary paths.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos;
}

Expected<std::map<std::string, std::string>> read_weight_map(const std::string& index_path) {
  KIPP_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path));
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    return make_error(std::string("not valid JSON: ") + e.what());
  }
  if (!root.is_object()) return make_error("expected a JSON object, found " + std::string(root.type_name()));
  if (!root.contains("weight_map")) return make_error("missing field 'weight_map'");
  const Json& map = root["weight_map"];
  if (!map.is_object())
    return make_error("field 'weight_map': expected an object, found " + std::string(map.type_name()));
  std::map<std::string, std::string> out;
  for (const auto& [tensor, shard] : map.items()) {
    if (!shard.is_string()) {
      return make_error("field 'weight_map': tensor " + single_quoted(tensor) + ": expected a shard file name, found " +
                        shard.dump());
    }
    const std::string& shard_name = shard.get_ref<const std::string&>();
    if (!is_plain_file_name(shard_name)) {
      return make_error("field 'weight_map': tensor " + single_quoted(tensor) + ": shard " + single_quoted(shard_name) +
                        " is not a plain file name in the checkpoint folder");
    }
    out.emplace(tensor, shard_name);
  }
  if (out.empty()) return make_error("field 'weight_map' lists no tensors");
  return out;
}

}  // namespace

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::string_view safetensors_dtype_name(SafetensorsDtype dtype) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.dtype == dtype) return info.name;
  }
  return "?";
}

size_t safetensors_dtype_bytes(SafetensorsDtype dtype) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.dtype == dtype) return info.bytes;
  }
  return 0;
}

Status safetensors_to_f32(const SafetensorsTensor& tensor, std::span<const uint8_t> bytes, std::span<float> out) {
  const uint64_t count = tensor.element_count();
  if (out.size() != count) {
    return make_error("tensor " + tensor.name + ": " + std::to_string(count) + " values for " +
                      std::to_string(out.size()) + " floats");
  }
  switch (tensor.dtype) {
    case SafetensorsDtype::F32: std::memcpy(out.data(), bytes.data(), count * 4); return {};
    case SafetensorsDtype::BF16:
    case SafetensorsDtype::F16: {
      std::vector<uint16_t> bits(count);
      std::memcpy(bits.data(), bytes.data(), count * 2);
      if (tensor.dtype == SafetensorsDtype::BF16) {
        bf16_to_f32_row(bits.data(), out.data(), count);
      } else {
        f16_to_f32_row(bits.data(), out.data(), count);
      }
      return {};
    }
    default:
      return make_error("tensor " + tensor.name + " has dtype " + std::string(safetensors_dtype_name(tensor.dtype)) +
                        " (expected F32, BF16 or F16)");
  }
}

uint64_t SafetensorsTensor::element_count() const {
  return std::accumulate(shape.begin(), shape.end(), uint64_t{1}, std::multiplies<uint64_t>());
}

Expected<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  try {
    SafetensorsFile file;
    KIPP_ASSIGN_OR_RETURN(file.file_, MappedFile::open(path));
    const uint64_t size = file.file_.size();
    if (size < 8) {
      return make_error(path + ": file is " + std::to_string(size) +
                        " bytes, shorter than the 8-byte header length field");
    }
    const uint64_t header_size = read_le_u64(file.file_.data());
    if (header_size > kMaxHeaderBytes) {
      return make_error(path + ": header length field is " + std::to_string(header_size) +
                        " bytes, above the limit of " + std::to_string(kMaxHeaderBytes));
    }
    if (header_size > size - 8) {
      return make_error(path + ": header length field is " + std::to_string(header_size) + " bytes but only " +
                        std::to_string(size - 8) + " bytes follow it (truncated file?)");
    }
    const char* header_text = reinterpret_cast<const char*>(file.file_.data() + 8);
    if (header_size == 0 || header_text[0] != '{') {
      return make_error(path + ": header must begin with '{' (header length " + std::to_string(header_size) + ")");
    }
    file.data_start_ = 8 + header_size;
    const uint64_t data_size = size - file.data_start_;

    auto root = parse_header_json({header_text, static_cast<size_t>(header_size)});
    if (!root.ok()) return make_error(path + ": " + root.message());
    for (const auto& [key, value] : root->items()) {
      if (key == kMetadataKey) {
        auto metadata = parse_metadata(value);
        if (!metadata.ok()) return make_error(path + ": " + metadata.message());
        file.metadata_ = std::move(*metadata);
        continue;
      }
      auto tensor = parse_tensor_entry(key, value, data_size);
      if (!tensor.ok()) return make_error(path + ": " + tensor.message());
      file.tensors_.push_back(std::move(*tensor));
    }
    const Status coverage = check_coverage(file.tensors_, data_size);
    if (!coverage.ok()) return make_error(path + ": " + coverage.message());
    for (size_t i = 0; i < file.tensors_.size(); ++i) file.index_.emplace(file.tensors_[i].name, i);
    return file;
  } catch (const std::exception& e) {
    return make_error(path + ": " + e.what());
  }
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> SafetensorsFile::data(const SafetensorsTensor& tensor) const {
  return file_.bytes().subspan(static_cast<size_t>(data_start_ + tensor.begin),
                               static_cast<size_t>(tensor.end - tensor.begin));
}

Expected<SafetensorsCheckpoint> SafetensorsCheckpoint::open_dir(const std::string& dir) {
  try {
    SafetensorsCheckpoint checkpoint;
    const std::string index_path = join_path(dir, kIndexName);
    const std::string single_path = join_path(dir, kSingleName);
    if (!file_exists(index_path)) {
      if (!file_exists(single_path)) {
        return make_error(dir + ": no safetensors checkpoint: neither " + std::string(kIndexName) + " nor " +
                          std::string(kSingleName) + " exists");
      }
      KIPP_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(single_path));
      checkpoint.files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
      checkpoint.shard_paths_.push_back(single_path);
      for (const SafetensorsTensor& tensor : checkpoint.files_.back()->tensors()) {
        checkpoint.tensors_.emplace(tensor.name, Ref{checkpoint.files_.back().get(), &tensor});
      }
      return checkpoint;
    }

    auto weight_map = read_weight_map(index_path);
    if (!weight_map.ok()) return make_error(index_path + ": " + weight_map.message());
    std::map<std::string, std::string> first_tensor_of_shard;  // sorted shard names, for messages
    for (const auto& [tensor, shard] : *weight_map) first_tensor_of_shard.emplace(shard, tensor);

    for (const auto& [shard, example_tensor] : first_tensor_of_shard) {
      const std::string shard_path = join_path(dir, shard);
      if (!file_exists(shard_path)) {
        return make_error(index_path + ": field 'weight_map' names shard " + single_quoted(shard) + " (for tensor " +
                          single_quoted(example_tensor) + ") but " + shard_path + " does not exist");
      }
      KIPP_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(shard_path));
      checkpoint.files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
      checkpoint.shard_paths_.push_back(shard_path);
      const SafetensorsFile* opened = checkpoint.files_.back().get();
      // Every tensor in the shard must be listed for this very shard; a tensor listed for
      // another shard is a duplicate across shards.
      for (const SafetensorsTensor& tensor : opened->tensors()) {
        const auto listed = weight_map->find(tensor.name);
        if (listed == weight_map->end()) {
          return make_error(shard_path + ": tensor " + single_quoted(tensor.name) + " is not listed in " +
                            std::string(kIndexName) + " field 'weight_map'");
        }
        if (listed->second != shard) {
          return make_error(shard_path + ": tensor " + single_quoted(tensor.name) +
                            " is duplicated: " + std::string(kIndexName) + " field 'weight_map' lists it in shard " +
                            single_quoted(listed->second) + ", found it in " + single_quoted(shard));
        }
        checkpoint.tensors_.emplace(tensor.name, Ref{opened, &tensor});
      }
    }
    for (const auto& [tensor, shard] : *weight_map) {
      if (checkpoint.tensors_.find(tensor) == checkpoint.tensors_.end()) {
        return make_error(index_path + ": field 'weight_map' lists tensor " + single_quoted(tensor) + " in shard " +
                          single_quoted(shard) + " but that shard has no such tensor");
      }
    }
    return checkpoint;
  } catch (const std::exception& e) {
    return make_error(dir + ": " + e.what());
  }
}

std::vector<std::string> SafetensorsCheckpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& entry : tensors_) names.push_back(entry.first);
  return names;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second.tensor;
}

std::span<const uint8_t> SafetensorsCheckpoint::data(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) return {};
  return it->second.file->data(*it->second.tensor);
}

namespace {

// Builds the padded header bytes (length field included) or names the offending tensor.
Expected<std::vector<uint8_t>> build_header(const std::vector<SafetensorsWriteTensor>& tensors,
                                            const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header[std::string(kMetadataKey)] = std::move(meta);
  }
  uint64_t offset = 0;
  std::set<std::string_view> names;
  for (const SafetensorsWriteTensor& tensor : tensors) {
    const std::string where = "tensor " + single_quoted(tensor.name);
    if (tensor.name == kMetadataKey) return make_error(where + ": the name is reserved for metadata");
    if (!names.insert(tensor.name).second) return make_error(where + ": name given more than once");
    if (safetensors_dtype_bytes(tensor.dtype) == 0) return make_error(where + ": field 'dtype': invalid value");
    const std::optional<uint64_t> bytes = tensor_byte_count(tensor.dtype, tensor.shape);
    if (!bytes) return make_error(where + ": field 'shape': " + shape_text(tensor.shape) + " overflows");
    if (*bytes != tensor.data.size()) {
      return make_error(where + ": shape " + shape_text(tensor.shape) + " of " +
                        std::string(safetensors_dtype_name(tensor.dtype)) + " needs " + std::to_string(*bytes) +
                        " bytes, found " + std::to_string(tensor.data.size()));
    }
    header[tensor.name] = {{"dtype", safetensors_dtype_name(tensor.dtype)},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + *bytes}}};
    offset += *bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::exception& e) {
    return make_error(std::string("tensor names and metadata must be valid UTF-8: ") + e.what());
  }
  // Pad with spaces so the data section starts 8-byte aligned (8 + text is then a multiple of 8).
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> out;
  out.reserve(8 + text.size());
  append_le_u64(out, text.size());
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

}  // namespace

Status write_safetensors(const std::string& path, const std::vector<SafetensorsWriteTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  try {
    auto header = build_header(tensors, metadata);
    if (!header.ok()) return make_error("writing " + path + ": " + header.message());
    KIPP_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(path));
    KIPP_RETURN_IF_ERROR(file.write(*header));
    for (const SafetensorsWriteTensor& tensor : tensors) KIPP_RETURN_IF_ERROR(file.write(tensor.data));
    return file.commit();
  } catch (const std::exception& e) {
    return make_error("writing " + path + ": " + e.what());
  }
}

}  // namespace kipp
