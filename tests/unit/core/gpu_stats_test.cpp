#include "core/gpu_stats.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "fake_nvml/fake_nvml.h"

namespace kipp {
namespace {

constexpr unsigned long long kGiB = 1ull << 30;

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// Sets CUDA_VISIBLE_DEVICES for one test and puts back what was there.
class VisibleDevices {
 public:
  explicit VisibleDevices(const char* value) {
    if (const char* old = std::getenv("CUDA_VISIBLE_DEVICES")) saved_ = old;
    if (value) {
      setenv("CUDA_VISIBLE_DEVICES", value, 1);
    } else {
      unsetenv("CUDA_VISIBLE_DEVICES");
    }
  }
  ~VisibleDevices() {
    if (saved_) {
      setenv("CUDA_VISIBLE_DEVICES", saved_->c_str(), 1);
    } else {
      unsetenv("CUDA_VISIBLE_DEVICES");
    }
  }

 private:
  std::optional<std::string> saved_;
};

TEST(GpuSelector, FirstVisibleDevice) {
  auto unset = parse_visible_devices(nullptr);
  ASSERT_TRUE(unset.ok());
  EXPECT_FALSE(unset->by_uuid);
  EXPECT_EQ(unset->index, 0u);
  auto empty = parse_visible_devices("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->index, 0u);
  auto list = parse_visible_devices("3,1");
  ASSERT_TRUE(list.ok());
  EXPECT_FALSE(list->by_uuid);
  EXPECT_EQ(list->index, 3u);
  auto uuid = parse_visible_devices("GPU-8d2f1c3a-0000-1111-2222-333344445555,0");
  ASSERT_TRUE(uuid.ok());
  EXPECT_TRUE(uuid->by_uuid);
  EXPECT_EQ(uuid->uuid, "GPU-8d2f1c3a-0000-1111-2222-333344445555");
}

TEST(GpuSelector, RefusesWhatItCannotName) {
  for (const char* value : {"MIG-2a7e", "x", "1x", "-1", ",0", "99999999999999999999"}) {
    auto selector = parse_visible_devices(value);
    ASSERT_FALSE(selector.ok()) << value;
    EXPECT_TRUE(starts_with(selector.message(), std::string("CUDA_VISIBLE_DEVICES=") + value)) << selector.message();
  }
}

TEST(GpuStats, MissingLibraryIsAnErrorNamingIt) {
  VisibleDevices unset(nullptr);
  auto stats = GpuStats::open("libkipp-no-such-nvml.so.1");
  ASSERT_FALSE(stats.ok());
  EXPECT_TRUE(
      starts_with(stats.message(), "cannot open libkipp-no-such-nvml.so.1 (NVML, installed with the NVIDIA driver): "))
      << stats.message();
  EXPECT_NE(stats.message().find("libkipp-no-such-nvml.so.1: cannot open shared object file"), std::string::npos)
      << stats.message();
}

TEST(GpuStats, LibraryWithoutNvmlIsAnErrorNamingTheFunction) {
  VisibleDevices unset(nullptr);
  auto stats = GpuStats::open("libc.so.6");
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.message(), "libc.so.6 has no function nvmlInit_v2");
}

TEST(GpuStats, DriversLibraryOpensOrSaysWhy) {
  auto stats = GpuStats::open();
  if (!stats.ok()) {
    EXPECT_TRUE(starts_with(stats.message(), "cannot open libnvidia-ml.so.1") ||
                starts_with(stats.message(), "NVML ") || starts_with(stats.message(), "CUDA_VISIBLE_DEVICES="))
        << stats.message();
    return;
  }
  auto sample = stats->sample();
  ASSERT_TRUE(sample.ok()) << sample.message();
  EXPECT_FALSE(sample->name.empty());
  EXPECT_GT(sample->memory_total_bytes, 0u);
  EXPECT_LE(sample->memory_used_bytes, sample->memory_peak_bytes);
  EXPECT_LE(sample->utilization_percent, 100.0);
}

// The reader against the stand-in library: the NVML calls and the figures made of them.
class FakeNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    library_ = dlopen(KIPP_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library_, nullptr) << dlerror();
    auto get_state = reinterpret_cast<test::FakeNvmlState* (*)()>(dlsym(library_, "kipp_fake_nvml_state"));
    ASSERT_NE(get_state, nullptr);
    state_ = get_state();
    *state_ = test::FakeNvmlState{};
    state_->utilization = 64;
    state_->total_bytes = 80 * kGiB;
    state_->used_bytes = 5 * kGiB;
  }
  void TearDown() override {
    if (library_) dlclose(library_);
  }

  void* library_ = nullptr;
  test::FakeNvmlState* state_ = nullptr;
};

TEST_F(FakeNvml, DeviceWideWhileThisProcessIsNotListed) {
  VisibleDevices unset(nullptr);
  state_->process_count = 1;
  state_->processes[0] = {static_cast<unsigned>(getpid()) + 1, 3 * kGiB};  // another process
  auto stats = GpuStats::open(KIPP_FAKE_NVML);
  ASSERT_TRUE(stats.ok()) << stats.message();
  EXPECT_EQ(state_->index_asked, 0);
  auto first = stats->sample();
  ASSERT_TRUE(first.ok()) << first.message();
  EXPECT_EQ(first->name, "Fake GPU 80GB");
  EXPECT_EQ(first->utilization_percent, 64.0);
  EXPECT_EQ(first->memory_scope, GpuMemoryScope::Device);
  EXPECT_EQ(first->memory_used_bytes, 5 * kGiB);
  EXPECT_EQ(first->memory_peak_bytes, 5 * kGiB);
  EXPECT_EQ(first->memory_total_bytes, 80 * kGiB);
  state_->used_bytes = 2 * kGiB;
  auto second = stats->sample();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->memory_used_bytes, 2 * kGiB);
  EXPECT_EQ(second->memory_peak_bytes, 5 * kGiB) << "the peak is the most any sample saw";
}

TEST_F(FakeNvml, ThisProcessOnceListedWithItsOwnPeak) {
  VisibleDevices unset(nullptr);
  auto stats = GpuStats::open(KIPP_FAKE_NVML);
  ASSERT_TRUE(stats.ok()) << stats.message();
  ASSERT_TRUE(stats->sample().ok());  // device-wide: 5 GiB, before this process has a context
  const auto self = static_cast<unsigned>(getpid());
  state_->process_count = 2;
  state_->processes[0] = {self + 1, 40 * kGiB};
  state_->processes[1] = {self, 3 * kGiB};
  auto listed = stats->sample();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->memory_scope, GpuMemoryScope::Process);
  EXPECT_EQ(listed->memory_used_bytes, 3 * kGiB);
  EXPECT_EQ(listed->memory_peak_bytes, 3 * kGiB) << "the device-wide peak is not this process's";
  state_->processes[1].used_bytes = 1 * kGiB;
  auto lower = stats->sample();
  ASSERT_TRUE(lower.ok());
  EXPECT_EQ(lower->memory_used_bytes, 1 * kGiB);
  EXPECT_EQ(lower->memory_peak_bytes, 3 * kGiB);
  // NVML may list the process without its figure (NVML_VALUE_NOT_AVAILABLE): the device's then.
  state_->processes[1].used_bytes = ~0ull;
  auto unknown = stats->sample();
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->memory_scope, GpuMemoryScope::Device);
  EXPECT_EQ(unknown->memory_used_bytes, 5 * kGiB);
}

TEST_F(FakeNvml, ManyProcessesAskAgainWithRoom) {
  VisibleDevices unset(nullptr);
  auto stats = GpuStats::open(KIPP_FAKE_NVML);
  ASSERT_TRUE(stats.ok()) << stats.message();
  const auto self = static_cast<unsigned>(getpid());
  state_->process_count = 100;
  for (unsigned i = 0; i < 99; ++i) state_->processes[i] = {self + 1 + i, kGiB};
  state_->processes[99] = {self, 7 * kGiB};
  auto sample = stats->sample();
  ASSERT_TRUE(sample.ok());
  EXPECT_EQ(state_->process_calls, 2);
  EXPECT_EQ(sample->memory_scope, GpuMemoryScope::Process);
  EXPECT_EQ(sample->memory_used_bytes, 7 * kGiB);
}

TEST_F(FakeNvml, DeviceFromCudaVisibleDevices) {
  {
    VisibleDevices two("2,0");
    auto stats = GpuStats::open(KIPP_FAKE_NVML);
    ASSERT_TRUE(stats.ok()) << stats.message();
    EXPECT_EQ(state_->index_asked, 2);
  }
  VisibleDevices uuid("GPU-0123abcd,1");
  auto stats = GpuStats::open(KIPP_FAKE_NVML);
  ASSERT_TRUE(stats.ok()) << stats.message();
  EXPECT_STREQ(state_->uuid_asked, "GPU-0123abcd");
}

TEST_F(FakeNvml, InitFailureNamesNvmlsReasonAndShutsDownNothing) {
  VisibleDevices unset(nullptr);
  state_->init_result = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  auto stats = GpuStats::open(KIPP_FAKE_NVML);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.message(), "NVML nvmlInit: Driver Not Loaded");
  EXPECT_EQ(state_->shutdown_calls, 0);
}

TEST_F(FakeNvml, EveryInitIsShutDown) {
  VisibleDevices unset(nullptr);
  {
    auto stats = GpuStats::open(KIPP_FAKE_NVML);
    ASSERT_TRUE(stats.ok()) << stats.message();
    GpuStats moved = std::move(*stats);
    ASSERT_TRUE(moved.sample().ok());
  }
  EXPECT_EQ(state_->init_calls, 1);
  EXPECT_EQ(state_->shutdown_calls, 1);
}

}  // namespace
}  // namespace kipp
