// safetensors: 8-byte little-endian header length, a JSON header, then raw tensor bytes.
// Reader over an mmap (single file or a sharded checkpoint via model.safetensors.index.json)
// and an atomic writer. Specification: https://github.com/huggingface/safetensors
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"

namespace kipp {

enum class SafetensorsDtype { BOOL, U8, I8, U16, I16, F16, BF16, U32, I32, F32, U64, I64, F64 };

std::string_view safetensors_dtype_name(SafetensorsDtype dtype);  // "BF16", ...
size_t safetensors_dtype_bytes(SafetensorsDtype dtype);
std::string shape_text(const std::vector<uint64_t>& shape);  // "[151936, 1024]"

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  std::vector<uint64_t> shape;  // row-major, outermost first (PyTorch order)
  uint64_t begin = 0;           // byte offsets relative to the data section
  uint64_t end = 0;
  uint64_t element_count() const;
};

// One mapped .safetensors file; validates header JSON, dtypes, shapes vs byte ranges,
// offsets inside the file, no overlap and full coverage of the data section.
class SafetensorsFile {
 public:
  static Expected<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // In data order (ascending data_offsets), which for files we write is the order given to
  // write_safetensors.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsTensor* find(std::string_view name) const;
  std::span<const uint8_t> data(const SafetensorsTensor& tensor) const;

 private:
  MappedFile file_;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a Hugging Face checkpoint folder: model.safetensors, or the shards listed by
// model.safetensors.index.json (every listed shard must exist and hold exactly its tensors).
class SafetensorsCheckpoint {
 public:
  static Expected<SafetensorsCheckpoint> open_dir(const std::string& dir);

  std::vector<std::string> tensor_names() const;  // sorted
  struct Ref {
    const SafetensorsFile* file;
    const SafetensorsTensor* tensor;
  };
  const SafetensorsTensor* find(std::string_view name) const;
  std::span<const uint8_t> data(std::string_view name) const;  // empty if absent
  const std::vector<std::string>& shard_paths() const { return shard_paths_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::string> shard_paths_;
  std::map<std::string, Ref, std::less<>> tensors_;
};

// Widens one tensor's bytes (F32, BF16 or F16) into `out` (element_count() floats); another dtype
// is an error naming it.
Status safetensors_to_f32(const SafetensorsTensor& tensor, std::span<const uint8_t> bytes, std::span<float> out);

struct SafetensorsWriteTensor {
  std::string name;
  SafetensorsDtype dtype;
  std::vector<uint64_t> shape;
  std::span<const uint8_t> data;
};

// Writes tensors in the given order (header keys and contiguous data offsets both follow it;
// the format does not require sorted keys), with optional __metadata__ first, the header
// space-padded so the data section starts 8-byte aligned, atomically. Fails, writing nothing,
// on a data size that does not match dtype x shape, a repeated or reserved name, or invalid UTF-8.
Status write_safetensors(const std::string& path, const std::vector<SafetensorsWriteTensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace kipp
