// train.device: the key and --device value parse, round-trip through to_yaml, and a cuda run is
// judged from the GPU probe's answer in a fixed order (build, unsupported keys, GPU).
#include <gtest/gtest.h>

#include "train/train_config.h"
#include "train/train_device.h"
#include "unit/helpers/test_assertions.h"

namespace kipp::train {
using kipp::test_support::has_substr;

namespace {

Expected<TrainConfig> parse(const std::string& yaml, std::vector<std::string> overrides = {}) {
  overrides.insert(overrides.begin(), {"tokenizer=/data/tokenizer.json", "data.train=[/data/a.txt]"});
  return parse_train_config(yaml, overrides, "/configs");
}

TrainConfig cuda_config() {
  TrainConfig config;
  config.train.device = TrainDevice::Cuda;
  return config;
}

const GpuProbe kUsableGpu{.built = true, .usable = {}};

TEST(TrainDevice, NamesParseBothWays) {
  for (TrainDevice device : {TrainDevice::Cpu, TrainDevice::Cuda}) {
    auto parsed = parse_device(device_name(device));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, device);
  }
  auto bad = parse_device("gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "expected cpu or cuda, got 'gpu'");
}

TEST(TrainDevice, ConfigKeyDefaultsToCpuAndRoundTrips) {
  auto defaults = parse("");
  ASSERT_TRUE(defaults.ok()) << defaults.message();
  EXPECT_EQ(defaults->train.device, TrainDevice::Cpu);

  auto cuda = parse("train:\n  device: cuda\n");
  ASSERT_TRUE(cuda.ok()) << cuda.message();
  EXPECT_EQ(cuda->train.device, TrainDevice::Cuda);
  const std::string yaml = to_yaml(*cuda);
  EXPECT_TRUE(has_substr(yaml, "device: cuda")) << yaml;
  auto again = parse_train_config(yaml, {}, "");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_TRUE(*again == *cuda);

  // The override --device writes wins over the file.
  auto overridden = parse("train:\n  device: cuda\n", {"train.device=cpu"});
  ASSERT_TRUE(overridden.ok()) << overridden.message();
  EXPECT_EQ(overridden->train.device, TrainDevice::Cpu);
}

TEST(TrainDevice, BadValuesNameTheKey) {
  auto word = parse("train:\n  device: tpu\n");
  ASSERT_FALSE(word.ok());
  EXPECT_TRUE(has_substr(word.message(), "train.device: expected cpu or cuda, got 'tpu'")) << word.message();
  auto list = parse("train:\n  device: [cuda]\n");
  ASSERT_FALSE(list.ok());
  EXPECT_TRUE(has_substr(list.message(), "train.device: expected cpu or cuda")) << list.message();
}

TEST(TrainDevice, CpuNeedsNothing) {
  TrainConfig config;
  config.train.lora.rank = 8;
  EXPECT_TRUE(check_train_device(config, 4, GpuProbe{}).ok());
}

TEST(TrainDevice, CudaWithoutTheBackendSaysSo) {
  const Status status = check_train_device(cuda_config(), 1, GpuProbe{});
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(has_substr(status.message(), "the cuda backend is not built into this Kipp")) << status.message();
}

TEST(TrainDevice, CudaRefusesLoraAndRanksNamingThem) {
  TrainConfig config = cuda_config();
  config.train.lora.rank = 8;
  const Status both = check_train_device(config, 2, kUsableGpu);
  ASSERT_FALSE(both.ok());
  EXPECT_TRUE(has_substr(both.message(), "train.lora (LoRA and QLoRA adapters)")) << both.message();
  EXPECT_TRUE(has_substr(both.message(), "data-parallel ranks under mpirun")) << both.message();

  const Status ranks = check_train_device(cuda_config(), 2, kUsableGpu);
  ASSERT_FALSE(ranks.ok());
  EXPECT_FALSE(has_substr(ranks.message(), "train.lora")) << ranks.message();
  EXPECT_TRUE(has_substr(ranks.message(), "data-parallel ranks")) << ranks.message();

  // The unsupported keys are named even where no GPU answers: the config must change either way.
  const Status no_gpu = check_train_device(config, 1, GpuProbe{.built = true, .usable = make_error("x")});
  EXPECT_TRUE(has_substr(no_gpu.message(), "train.lora")) << no_gpu.message();
}

TEST(TrainDevice, CudaWithoutAGpuGivesTheProbesReason) {
  const GpuProbe probe{.built = true, .usable = make_error("no usable NVIDIA GPU: no CUDA device is visible")};
  const Status status = check_train_device(cuda_config(), 1, probe);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "train.device: cuda, but no usable NVIDIA GPU: no CUDA device is visible");
}

TEST(TrainDevice, CudaWithAGpuIsAcceptedWithAndWithoutRecomputation) {
  EXPECT_TRUE(check_train_device(cuda_config(), 1, kUsableGpu).ok());
  TrainConfig recompute = cuda_config();
  recompute.train.recompute_blocks = true;
  EXPECT_TRUE(check_train_device(recompute, 1, kUsableGpu).ok());
}

}  // namespace
}  // namespace kipp::train
