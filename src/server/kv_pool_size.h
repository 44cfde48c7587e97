// How large the server's K/V pool is when --kv-pool-mib is not given. On the CPU it is a fixed
// size (host memory is shared with everything else on the machine); on a GPU the pool takes most
// of the device memory the engine leaves free, since nothing else should need it.
#pragma once

#include <cstdint>

namespace kipp::server {

inline constexpr uint32_t kHostKvPoolMib = 512;
// The share of the device's free memory (after the weights and scratch are loaded) the pool may
// take, and the margin kept besides for what grows after start-up: captured decode graphs,
// cuBLASLt's workspace for new shapes, the CUDA allocator's own bookkeeping.
inline constexpr double kDeviceKvPoolFraction = 0.90;
inline constexpr uint64_t kDeviceKvPoolMarginBytes = uint64_t{1} << 30;

// Blocks of `block_bytes` for a pool on a device with `free_bytes` free: the smaller of
// kDeviceKvPoolFraction of the free memory less kDeviceKvPoolMarginBytes, and `needed_blocks`
// (every batch slot at its full context; more could never be used). 0 when nothing fits.
uint64_t device_kv_pool_blocks(uint64_t free_bytes, uint64_t block_bytes, uint64_t needed_blocks);

}  // namespace kipp::server
