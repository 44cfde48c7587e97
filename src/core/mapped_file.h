// A read-only memory mapping of a whole file; move-only, unmapped on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace kipp {

class MappedFile {
 public:
  static Expected<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void release();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace kipp

namespace kipp {
// Lets the kernel drop the resident pages of a range of a read-only mapping (they are
// re-read on the next access). Streaming readers call it so RSS stays bounded.
void drop_mapped_pages(std::span<const uint8_t> range);
}  // namespace kipp
