// The default K/V pool on a GPU: a share of the free memory less a margin, in whole blocks,
// capped by what the batch can use.
#include "server/kv_pool_size.h"

#include <gtest/gtest.h>

namespace kipp::server {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(DeviceKvPool, TakesTheShareOfFreeMemoryLessTheMarginInWholeBlocks) {
  // 80 GiB free, blocks of 3.5 MiB (Qwen3-0.6B: 32 positions x 112 KiB): 0.9 x 80 GiB - 1 GiB
  // = 71 GiB = 72704 MiB, 20772.57 blocks -> 20772.
  EXPECT_EQ(device_kv_pool_blocks(80 * kGiB, 7 * kMiB / 2, UINT64_MAX), 20772u);
}

TEST(DeviceKvPool, IsCappedByWhatTheBatchCanUse) {
  EXPECT_EQ(device_kv_pool_blocks(80 * kGiB, 7 * kMiB / 2, 16 * 1280), 16u * 1280u);
  EXPECT_EQ(device_kv_pool_blocks(80 * kGiB, 7 * kMiB / 2, 0), 0u);
}

TEST(DeviceKvPool, NothingWhenTheMarginTakesItAll) {
  // 0.9 x 1 GiB is below the 1 GiB margin; 0.9 x 1.2 GiB leaves 0.08 GiB, less than a block.
  EXPECT_EQ(device_kv_pool_blocks(kGiB, kMiB, UINT64_MAX), 0u);
  EXPECT_EQ(device_kv_pool_blocks(0, kMiB, UINT64_MAX), 0u);
  EXPECT_EQ(device_kv_pool_blocks(12 * kGiB / 10, 100 * kMiB, UINT64_MAX), 0u);
  EXPECT_EQ(device_kv_pool_blocks(80 * kGiB, 0, UINT64_MAX), 0u);
}

TEST(DeviceKvPool, StatedShareAndMargin) {
  // The exact boundary: free memory whose share is the margin plus exactly one block.
  const uint64_t block = 4 * kMiB;
  const auto free_bytes =
      static_cast<uint64_t>(static_cast<double>(kDeviceKvPoolMarginBytes + block) / kDeviceKvPoolFraction) + 1;
  EXPECT_EQ(device_kv_pool_blocks(free_bytes, block, UINT64_MAX), 1u);
  EXPECT_EQ(device_kv_pool_blocks(free_bytes - 16 * kMiB, block, UINT64_MAX), 0u);
}

}  // namespace
}  // namespace kipp::server
