#include "server/kv_pool_size.h"

#include <algorithm>

namespace kipp::server {

uint64_t device_kv_pool_blocks(uint64_t free_bytes, uint64_t block_bytes, uint64_t needed_blocks) {
  if (block_bytes == 0) return 0;
  const auto share = static_cast<uint64_t>(static_cast<double>(free_bytes) * kDeviceKvPoolFraction);
  const uint64_t usable = share > kDeviceKvPoolMarginBytes ? share - kDeviceKvPoolMarginBytes : 0;
  return std::min(usable / block_bytes, needed_blocks);
}

}  // namespace kipp::server
