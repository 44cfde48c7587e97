// The bandwidth probe kept between passes (kipp bench interleaves its passes with decode tokens)
// and the large buffers it and the packed weights live in.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "core/large_buffer.h"
#include "kernels/cpu/machine_probe.h"

namespace kipp {
namespace {

TEST(LargeBuffer, IsAlignedToHugePagesAndWritableToItsEnd) {
  const size_t bytes = (size_t{3} << 20) + 5;
  LargeBuffer buffer = allocate_large_buffer(bytes);
  ASSERT_NE(buffer, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.get()) % (size_t{2} << 20), 0u);
  std::memset(buffer.get(), 7, bytes);
  EXPECT_EQ(buffer[bytes - 1], 7);
}

TEST(BandwidthProbe, CountsItsPassesAndOrdersBestAboveMedian) {
  auto probe = kernels::BandwidthProbe::create(2, size_t{4} << 20);
  ASSERT_TRUE(probe.ok()) << probe.message();
  kernels::BandwidthResult before = (*probe)->result();
  EXPECT_EQ(before.passes, 0u);
  EXPECT_EQ(before.best_gb_per_second, 0.0);
  EXPECT_EQ(before.buffer_bytes, size_t{4} << 20);
  EXPECT_EQ(before.threads, 2u);
  for (int pass = 0; pass < 3; ++pass) ASSERT_TRUE((*probe)->timed_pass().ok());
  const auto between = (*probe)->timed_pass_between_runs();
  ASSERT_TRUE(between.ok());
  EXPECT_GT(*between, 0.0);
  const kernels::BandwidthResult after = (*probe)->result();
  EXPECT_EQ(after.passes, 4u);
  EXPECT_GT(after.median_gb_per_second, 0.0);
  EXPECT_GE(after.best_gb_per_second, after.median_gb_per_second);
}

TEST(BandwidthProbe, RejectsABufferWithoutAWholeLine) {
  auto probe = kernels::BandwidthProbe::create(1, 63);
  ASSERT_FALSE(probe.ok());
  EXPECT_NE(probe.message().find("64-byte line"), std::string::npos) << probe.message();
  EXPECT_FALSE(kernels::read_bandwidth(1, size_t{1} << 20, 0).ok());
}

}  // namespace
}  // namespace kipp
