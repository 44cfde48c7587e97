// The AMX tile configuration shared by the BF16 kernel and kipp bench's AMX probe: palette 1,
// all eight tile registers 16 rows of 64 bytes (a 16 x 16 FP32 accumulator, 16 rows x 32 BF16
// inputs, or 16 column pairs x 16 outputs of BF16 weights). The integer kernel configures its
// own shapes from the same TileConfig.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kipp::kernels::amx {

inline constexpr size_t kTileRows = 16;
inline constexpr size_t kTileBytes = 1024;  // 16 rows of 64 bytes

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

constexpr TileConfig uniform_tile_config() {
  TileConfig config;
  for (int tile = 0; tile < 8; ++tile) {
    config.bytes_per_row[tile] = kTileBytes / kTileRows;
    config.rows[tile] = kTileRows;
  }
  return config;
}

// The compiler does not see the tile instructions' memory accesses: a barrier orders them
// against the loads and stores around them.
inline void memory_barrier() { asm volatile("" ::: "memory"); }

}  // namespace kipp::kernels::amx
