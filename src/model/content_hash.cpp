#include "model/content_hash.h"

#include <xxhash.h>

#include <cstdio>

namespace kipp {

ContentHasher::ContentHasher() : state_(XXH3_createState()) { XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_)); }

ContentHasher::~ContentHasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void ContentHasher::add_tensor(std::string_view name, GgmlType type, const std::vector<uint64_t>& dims,
                               std::span<const uint8_t> data) {
  begin_tensor(name, type, dims);
  add_data(data);
}

void ContentHasher::begin_tensor(std::string_view name, GgmlType type, const std::vector<uint64_t>& dims) {
  auto* state = static_cast<XXH3_state_t*>(state_);
  const uint64_t name_length = name.size();
  const auto type_id = static_cast<uint32_t>(type);
  const uint64_t dim_count = dims.size();
  XXH3_128bits_update(state, &name_length, sizeof name_length);
  XXH3_128bits_update(state, name.data(), name.size());
  XXH3_128bits_update(state, &type_id, sizeof type_id);
  XXH3_128bits_update(state, &dim_count, sizeof dim_count);
  XXH3_128bits_update(state, dims.data(), dims.size() * sizeof(uint64_t));
}

void ContentHasher::add_data(std::span<const uint8_t> data) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data.data(), data.size());
}

std::string ContentHasher::finish_hex() {
  const XXH128_hash_t hash = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  char text[64];
  std::snprintf(text, sizeof text, "xxh3-128:%016llx%016llx", static_cast<unsigned long long>(hash.high64),
                static_cast<unsigned long long>(hash.low64));
  return text;
}

}  // namespace kipp
