// Memory for large buffers that are read at memory speed again and again (weights arranged for
// the kernels, the bandwidth probe's buffer). Aligned to 2 MiB and advised for transparent huge
// pages where the kernel offers them only on request (THP "madvise" mode): each 2 MiB then
// takes one TLB entry instead of 512, and the hardware prefetchers, which stop at page
// boundaries, run on (bench/kernel_bench single-row products show the difference).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace kipp {

struct FreeLargeBuffer {
  void operator()(uint8_t* bytes) const { std::free(bytes); }
};
using LargeBuffer = std::unique_ptr<uint8_t[], FreeLargeBuffer>;

// `bytes` of uninitialised memory (rounded up to whole 2 MiB), or nullptr when there is none.
LargeBuffer allocate_large_buffer(size_t bytes);

}  // namespace kipp
