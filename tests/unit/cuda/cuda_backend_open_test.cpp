#include <gtest/gtest.h>

#include <filesystem>

#include "backend/cuda/cuda_device.h"
#include "runtime/engine.h"

namespace kipp {
namespace {

// Without a GPU, opening a model on the cuda backend is one clear error, not a crash.
TEST(CudaBackendOpen, WithoutAGpuSaysSo) {
  const Expected<CudaDeviceInfo> device = cuda_device_info();
  if (device.ok()) GTEST_SKIP() << "a GPU is present: the CUDA gates cover opening a model on it";
  const std::string path = std::string(KIPP_TEST_MODELS) + "/tiny-bf16.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is made by the conversion tests";
  EngineOptions options;
  options.backend = BackendKind::Cuda;
  options.verify_content_hash = false;
  const auto engine = Engine::open(path, options);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.message().find("no usable NVIDIA GPU"), std::string::npos) << engine.message();
  EXPECT_NE(engine.message().find(device.message()), std::string::npos) << engine.message();
}

}  // namespace
}  // namespace kipp
