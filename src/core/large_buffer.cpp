#include "core/large_buffer.h"

#include <sys/mman.h>

namespace kipp {

constexpr size_t kHugePageBytes = size_t{2} << 20;

LargeBuffer allocate_large_buffer(size_t bytes) {
  const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  LargeBuffer buffer(
      static_cast<uint8_t*>(std::aligned_alloc(kHugePageBytes, rounded == 0 ? kHugePageBytes : rounded)));
  // Only advice: where the kernel has no huge pages to give, the buffer works as it is.
  if (buffer != nullptr) ::madvise(buffer.get(), rounded, MADV_HUGEPAGE);
  return buffer;
}

}  // namespace kipp
