// GgufWriter: lays out and writes GGUF v3 files that GgufFile::parse accepts.
//
// Everything the parser would reject (duplicate keys, bad shapes, unknown types, mixed array
// items, too-deep arrays) is rejected here first, so a written file always reads back equal.
#include "format/gguf.h"

#include <limits>
#include <set>
#include <type_traits>

namespace kipp {
namespace {

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

bool is_power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

// Little-endian serialization of the header, metadata and tensor directory.
class ByteSink {
 public:
  template <typename T>
  void put(T value) {
    static_assert(std::is_unsigned_v<T>);
    for (size_t i = 0; i < sizeof(T); ++i) bytes_.push_back(static_cast<uint8_t>(value >> (8 * i)));
  }
  void put_string(std::string_view text) {
    put<uint64_t>(text.size());
    bytes_.insert(bytes_.end(), text.begin(), text.end());
  }
  void pad_to(uint64_t size) { bytes_.resize(static_cast<size_t>(size), 0); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

Status put_value(ByteSink& sink, const GgufValue& value, int depth);

// An array's payload; `depth` counts this array, as in the parser.
Status put_array(ByteSink& sink, const GgufValue& value, int depth) {
  const GgufValueType element_type = value.array_type();
  if (static_cast<uint32_t>(element_type) > static_cast<uint32_t>(GgufValueType::FLOAT64)) {
    return make_error("array element type " + std::to_string(static_cast<uint32_t>(element_type)) +
                      " is unknown (expected 0 to 12)");
  }
  if (element_type == GgufValueType::ARRAY && depth >= GgufFile::kMaxArrayDepth) {
    return make_error("arrays are nested deeper than " + std::to_string(GgufFile::kMaxArrayDepth) + " levels");
  }
  const std::vector<GgufValue>& items = *value.as_array();
  sink.put<uint32_t>(static_cast<uint32_t>(element_type));
  sink.put<uint64_t>(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].type() != element_type) {
      return make_error("array element #" + std::to_string(i) + " has type " +
                        std::string(gguf_value_type_name(items[i].type())) + " (expected " +
                        std::string(gguf_value_type_name(element_type)) + ")");
    }
    const Status status = put_value(sink, items[i], depth);
    if (!status.ok()) return make_error("array element #" + std::to_string(i) + ": " + status.message());
  }
  return ok_status();
}

// A value's payload (without its type tag); `depth` is the number of arrays around it.
Status put_value(ByteSink& sink, const GgufValue& value, int depth) {
  switch (value.type()) {
    case GgufValueType::STRING: sink.put_string(*value.as_string()); return ok_status();
    case GgufValueType::ARRAY: return put_array(sink, value, depth + 1);
    default: break;
  }
  // Scalars: the low bytes of the payload; floats go by their bits, never through a
  // conversion that could quiet a signalling NaN.
  const uint64_t bits = value.bits();
  switch (gguf_scalar_size(value.type())) {
    case 1: sink.put(static_cast<uint8_t>(bits)); break;
    case 2: sink.put(static_cast<uint16_t>(bits)); break;
    case 4: sink.put(static_cast<uint32_t>(bits)); break;
    default: sink.put(bits); break;
  }
  return ok_status();
}

}  // namespace

void GgufWriter::set_alignment(uint32_t alignment) {
  alignment_ = alignment;
  for (GgufMetadataEntry& entry : metadata_) {
    if (entry.key == GgufFile::kAlignmentKey && entry.value.type() == GgufValueType::UINT32) {
      entry.value = GgufValue::u32(alignment);
    }
  }
}

void GgufWriter::add_metadata(std::string key, GgufValue value) {
  if (key == GgufFile::kAlignmentKey && value.type() == GgufValueType::UINT32) {
    alignment_ = static_cast<uint32_t>(*value.as_uint());
  }
  metadata_.push_back({std::move(key), std::move(value)});
}

void GgufWriter::add_tensor(std::string name, std::vector<uint64_t> dims, GgmlType type) {
  GgufTensorInfo info;
  info.name = std::move(name);
  info.dims = std::move(dims);
  info.type = type;
  tensors_.push_back(std::move(info));
}

Expected<std::vector<uint8_t>> GgufWriter::layout() {
  if (!is_power_of_two(alignment_)) {
    return make_error("GGUF writer: alignment " + std::to_string(alignment_) + " is not a power of two");
  }
  std::vector<const GgufMetadataEntry*> entries;
  std::set<std::string_view> keys;
  for (const GgufMetadataEntry& entry : metadata_) {
    const std::string context = "GGUF writer: metadata '" + entry.key + "'";
    if (entry.key.empty()) {
      return make_error("GGUF writer: metadata key #" + std::to_string(entries.size()) + " is empty");
    }
    if (!keys.insert(entry.key).second) return make_error(context + ": duplicate key");
    if (entry.key == GgufFile::kAlignmentKey && entry.value.type() != GgufValueType::UINT32) {
      return make_error(context + ": type " + std::string(gguf_value_type_name(entry.value.type())) +
                        " is not allowed (expected u32)");
    }
    entries.push_back(&entry);
  }
  const GgufMetadataEntry implicit_alignment{std::string(GgufFile::kAlignmentKey), GgufValue::u32(alignment_)};
  if (alignment_ != GgufFile::kDefaultAlignment && !keys.contains(GgufFile::kAlignmentKey)) {
    entries.push_back(&implicit_alignment);
  }

  ByteSink sink;
  sink.put<uint32_t>(GgufFile::kMagic);
  sink.put<uint32_t>(GgufFile::kVersion);
  sink.put<uint64_t>(tensors_.size());
  sink.put<uint64_t>(entries.size());
  for (const GgufMetadataEntry* entry : entries) {
    sink.put_string(entry->key);
    sink.put<uint32_t>(static_cast<uint32_t>(entry->value.type()));
    const Status status = put_value(sink, entry->value, 0);
    if (!status.ok()) return make_error("GGUF writer: metadata '" + entry->key + "': " + status.message());
  }

  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (GgufTensorInfo& info : tensors_) {
    const std::string context = "GGUF writer: tensor '" + info.name + "'";
    if (info.name.empty() || info.name.size() > GgufFile::kMaxTensorNameBytes) {
      return make_error(context + ": name length " + std::to_string(info.name.size()) +
                        " is out of range (expected 1 to " + std::to_string(GgufFile::kMaxTensorNameBytes) + ")");
    }
    if (!names.insert(info.name).second) return make_error(context + ": duplicate name");
    if (info.dims.empty() || info.dims.size() > GgufFile::kMaxDims) {
      return make_error(context + ": " + std::to_string(info.dims.size()) + " dimensions (expected 1 to " +
                        std::to_string(GgufFile::kMaxDims) + ")");
    }
    uint64_t elements = 1;
    for (size_t d = 0; d < info.dims.size(); ++d) {
      const uint64_t dim = info.dims[d];
      if (dim < 1 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          elements > std::numeric_limits<uint64_t>::max() / dim) {
        return make_error(context + ": dimension " + std::to_string(d) + " is " + std::to_string(dim) +
                          " (expected >= 1, with a product that fits 64 bits)");
      }
      elements *= dim;
    }
    const auto traits = ggml_type_traits(static_cast<uint32_t>(info.type));
    if (!traits) {
      return make_error(context + ": ggml type " + std::to_string(static_cast<uint32_t>(info.type)) + " is unknown");
    }
    if (info.dims[0] % traits->block_elements != 0) {
      return make_error(context + ": dimension 0 (" + std::to_string(info.dims[0]) + ") is not a multiple of the " +
                        std::string(traits->name) + " block size " + std::to_string(traits->block_elements));
    }
    const auto size = ggml_tensor_bytes(info.type, elements);
    if (!size || *size > std::numeric_limits<uint64_t>::max() - alignment_ - offset) {
      return make_error(context + ": the data size overflows 64 bits");
    }
    info.size_bytes = *size;
    info.offset = offset;
    offset = align_up(offset + info.size_bytes, alignment_);

    sink.put_string(info.name);
    sink.put<uint32_t>(static_cast<uint32_t>(info.dims.size()));
    for (uint64_t dim : info.dims) sink.put<uint64_t>(dim);
    sink.put<uint32_t>(static_cast<uint32_t>(info.type));
    sink.put<uint64_t>(info.offset);
  }
  data_start_ = align_up(sink.bytes().size(), alignment_);
  sink.pad_to(data_start_);
  return std::move(sink.bytes());
}

Status GgufWriter::check_tensor_data(size_t index, std::string_view name, size_t size) const {
  if (index >= tensors_.size()) {
    return make_error("GGUF writer: tensor '" + std::string(name) + "' written after all " +
                      std::to_string(tensors_.size()) + " declared tensors");
  }
  const GgufTensorInfo& info = tensors_[index];
  if (name != info.name) {
    return make_error("GGUF writer: tensor '" + std::string(name) + "' written out of order (expected '" + info.name +
                      "', tensor #" + std::to_string(index) + ")");
  }
  if (size != info.size_bytes) {
    return make_error("GGUF writer: tensor '" + info.name + "': " + std::to_string(size) + " bytes given (expected " +
                      std::to_string(info.size_bytes) + " for " + std::string(ggml_type_name(info.type)) + " with " +
                      std::to_string(info.element_count()) + " elements)");
  }
  return ok_status();
}

Status GgufWriter::begin(const std::string& path) {
  if (file_) return make_error("GGUF writer: begin(" + path + ") while another file is being written");
  KIPP_ASSIGN_OR_RETURN(const std::vector<uint8_t> head, layout());
  KIPP_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(path));
  KIPP_RETURN_IF_ERROR(file.write(head));
  file_.emplace(std::move(file));
  next_tensor_ = 0;
  next_tensor_written_ = 0;
  return ok_status();
}

Status GgufWriter::write_tensor(std::string_view name, std::span<const uint8_t> data) {
  if (!file_) return make_error("GGUF writer: write_tensor('" + std::string(name) + "') before begin()");
  if (next_tensor_written_ != 0) {
    return make_error("GGUF writer: write_tensor('" + std::string(name) + "') while tensor '" +
                      tensors_[next_tensor_].name + "' is partly written");
  }
  KIPP_RETURN_IF_ERROR(check_tensor_data(next_tensor_, name, data.size()));
  return write_tensor_part(name, data);
}

Status GgufWriter::write_tensor_part(std::string_view name, std::span<const uint8_t> part) {
  if (!file_) return make_error("GGUF writer: write_tensor_part('" + std::string(name) + "') before begin()");
  if (next_tensor_ >= tensors_.size() || name != tensors_[next_tensor_].name) {
    return check_tensor_data(next_tensor_, name, 0);  // names the out-of-order or extra tensor
  }
  const GgufTensorInfo& info = tensors_[next_tensor_];
  if (part.size() > info.size_bytes - next_tensor_written_) {
    return make_error("GGUF writer: tensor '" + info.name + "': pieces exceed its " + std::to_string(info.size_bytes) +
                      " bytes");
  }
  if (next_tensor_written_ == 0) {
    const uint64_t start = data_start_ + info.offset;
    KIPP_RETURN_IF_ERROR(file_->write_zeros(start - file_->bytes_written()));
  }
  KIPP_RETURN_IF_ERROR(file_->write(part));
  next_tensor_written_ += part.size();
  if (next_tensor_written_ == info.size_bytes) {
    ++next_tensor_;
    next_tensor_written_ = 0;
  }
  return ok_status();
}

Status GgufWriter::finish() {
  if (!file_) return make_error("GGUF writer: finish() before begin()");
  if (next_tensor_ < tensors_.size()) {
    return make_error("GGUF writer: finish() after " + std::to_string(next_tensor_) + " of " +
                      std::to_string(tensors_.size()) + " tensors (next expected: '" + tensors_[next_tensor_].name +
                      "')");
  }
  // The file ends aligned, like every tensor, so it can be appended to or mapped in pages.
  const uint64_t written = file_->bytes_written();
  Status status = file_->write_zeros(align_up(written, alignment_) - written);
  if (status.ok()) status = file_->commit();
  file_.reset();
  return status;
}

Status GgufWriter::write_all(const std::string& path,
                             const std::vector<std::span<const uint8_t>>& tensor_data_in_order) {
  if (tensor_data_in_order.size() != tensors_.size()) {
    return make_error("GGUF writer: " + std::to_string(tensor_data_in_order.size()) + " tensor buffers given for " +
                      std::to_string(tensors_.size()) + " declared tensors");
  }
  KIPP_RETURN_IF_ERROR(begin(path));
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Status status = write_tensor(tensors_[i].name, tensor_data_in_order[i]);
    if (!status.ok()) {
      file_.reset();  // removes the temporary file
      return status;
    }
  }
  return finish();
}

Expected<std::vector<uint8_t>> GgufWriter::to_bytes(const std::vector<std::span<const uint8_t>>& tensor_data_in_order) {
  if (tensor_data_in_order.size() != tensors_.size()) {
    return make_error("GGUF writer: " + std::to_string(tensor_data_in_order.size()) + " tensor buffers given for " +
                      std::to_string(tensors_.size()) + " declared tensors");
  }
  KIPP_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, layout());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    KIPP_RETURN_IF_ERROR(check_tensor_data(i, tensors_[i].name, tensor_data_in_order[i].size()));
    bytes.resize(static_cast<size_t>(data_start_ + tensors_[i].offset), 0);
    bytes.insert(bytes.end(), tensor_data_in_order[i].begin(), tensor_data_in_order[i].end());
  }
  bytes.resize(static_cast<size_t>(align_up(bytes.size(), alignment_)), 0);
  return bytes;
}

Expected<std::vector<uint8_t>> reserialize_gguf(const GgufFile& file) {
  GgufWriter writer;
  writer.set_alignment(file.alignment());
  for (const auto& entry : file.metadata()) writer.add_metadata(entry.key, entry.value);
  std::vector<std::span<const uint8_t>> data;
  for (const auto& tensor : file.tensors()) {
    writer.add_tensor(tensor.name, tensor.dims, tensor.type);
    data.push_back(file.tensor_data(tensor));
  }
  return writer.to_bytes(data);
}

}  // namespace kipp
