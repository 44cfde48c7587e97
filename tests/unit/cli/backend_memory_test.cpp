// How `kipp inspect --backend` and the bench show a backend's memory, and the JSON of it.
#include "cli/backend_memory.h"

#include <gtest/gtest.h>

#include "runtime/engine.h"
#include "unit/helpers/gguf_blueprint.h"

namespace kipp::cli {
namespace {

TEST(BackendMemoryText, DeviceLinesInMebibytes) {
  BackendMemory memory;
  memory.device = "NVIDIA H100 80GB HBM3";
  memory.weight_bytes = uint64_t{1536} << 20;
  memory.kv_bytes = uint64_t{3} << 19;  // 1.5 MiB
  memory.scratch_bytes = 0;
  memory.graph_bytes = uint64_t{5} << 20;
  memory.device_free_bytes = uint64_t{70} << 30;
  memory.device_total_bytes = uint64_t{80} << 30;
  EXPECT_EQ(backend_memory_text(memory),
            "memory on NVIDIA H100 80GB HBM3:\n"
            "  weights          1536.0 MiB\n"
            "  K/V                 1.5 MiB\n"
            "  scratch             0.0 MiB\n"
            "  graphs              5.0 MiB\n"
            "  free            71680.0 MiB\n"
            "  total           81920.0 MiB\n");
  const auto json = backend_memory_json(memory);
  EXPECT_EQ(json["device"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(json["kv_bytes"], uint64_t{3} << 19);
  EXPECT_EQ(json["device_total_bytes"], uint64_t{80} << 30);
}

TEST(BackendMemoryText, CpuBackendSaysHostMemory) {
  auto engine = Engine::open(kipp::testing::engine_model_path());
  ASSERT_TRUE(engine.ok()) << engine.message();
  const BackendMemory memory = (*engine)->backend().memory();
  const std::string text = backend_memory_text(memory);
  EXPECT_EQ(text.rfind("memory on cpu:\n", 0), 0u) << text;
  EXPECT_NE(text.find("\n  (host memory: no device of its own)\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("free"), std::string::npos) << text;
  EXPECT_GT(memory.scratch_bytes, 0u);
}

}  // namespace
}  // namespace kipp::cli
