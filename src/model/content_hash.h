// The content hash a Kipp GGUF records: XXH3-128 over the tensor directory (names, types,
// dims) and every tensor's bytes, in file order. It detects corrupted or altered weights at
// load time at close to memory speed (XXH3 is non-cryptographic); it is an integrity check, not
// a signature.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/ggml_types.h"

namespace kipp {

class ContentHasher {
 public:
  ContentHasher();
  ~ContentHasher();
  ContentHasher(const ContentHasher&) = delete;
  ContentHasher& operator=(const ContentHasher&) = delete;

  void add_tensor(std::string_view name, GgmlType type, const std::vector<uint64_t>& dims,
                  std::span<const uint8_t> data);
  // add_tensor in pieces: the directory entry, then the data in consecutive parts.
  void begin_tensor(std::string_view name, GgmlType type, const std::vector<uint64_t>& dims);
  void add_data(std::span<const uint8_t> data);
  std::string finish_hex();  // "xxh3-128:<32 hex digits>"

 private:
  void* state_;
};

}  // namespace kipp
