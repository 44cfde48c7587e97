// The bench document of a cuda run, from a made-up result (no GPU needed): the device section,
// and every fraction set against the measured ceilings instead of the host probes.
#include <gtest/gtest.h>

#include "cli/bench_costs.h"
#include "cli/bench_report.h"
#include "runtime/engine.h"
#include "unit/helpers/gguf_blueprint.h"

namespace kipp::cli {
namespace {

TEST(BenchDevice, FractionsOfTheMeasuredCeilings) {
  auto engine = Engine::open(kipp::testing::engine_model_path());
  ASSERT_TRUE(engine.ok()) << engine.message();
  const Model& model = (*engine)->model();

  BenchResult result;
  result.machine = read_machine_info();
  BenchDevice device;
  device.info.name = "NVIDIA H100 80GB HBM3";
  device.info.compute_major = 9;
  device.info.compute_minor = 0;
  device.info.multiprocessors = 132;
  device.info.driver_version = 13000;
  device.info.runtime_version = 13000;
  device.info.total_bytes = uint64_t{80} << 30;
  device.memory_after_load.device = device.info.name;
  device.memory_after_load.weight_bytes = 12345;
  device.ceilings.copy_bytes_per_second = 2.5e12;
  device.ceilings.bf16_flops_per_second = 7.0e14;
  result.device = device;
  result.prefills.push_back(PrefillRun{16, 1, {4000, 4000, 4000}});
  result.decode.prompt_tokens = 16;
  result.decode.generated_tokens = 4;
  result.decode.tokens_per_second = {500, 400, 600};
  result.decode.mean_positions = 18.5;
  result.batches.push_back(BatchRun{8, 16, 4, {3000, 2000, 3500}, {6, 5, 7}});
  result.batches.push_back(BatchRun{32, 16, 4, {9000, 8000, 9500}, {18, 16, 19}});

  const auto json = bench_json(**engine, result);
  EXPECT_TRUE(json["probes"].is_null());
  const auto& d = json["device"];
  EXPECT_EQ(d["name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d["compute_capability"], "9.0");
  EXPECT_EQ(d["driver_version"], 13000);
  EXPECT_EQ(d["memory_after_load"]["weight_bytes"], 12345);
  EXPECT_EQ(d["ceilings"]["copy_bytes_per_second"], 2.5e12);
  EXPECT_EQ(json["engine"]["kernels"], json["engine"]["backend"]);

  // Prefill: the model's FLOPs at the median rate over the BF16 product's FLOP/s.
  const double flops_per_second = prefill_flops(model, 16) * 4000 / 16;
  EXPECT_DOUBLE_EQ(json["prefill"][0]["flops_per_second"].get<double>(), flops_per_second);
  EXPECT_DOUBLE_EQ(json["prefill"][0]["peak_flops_per_second"].get<double>(), 7.0e14);
  EXPECT_DOUBLE_EQ(json["prefill"][0]["fraction_of_peak"].get<double>(), flops_per_second / 7.0e14);
  EXPECT_EQ(json["prefill"][0]["peak_kind"], "bf16_dot");

  // Decode: bytes per token (weights + K/V at the mean context) at the median rate over the copy.
  const double bytes = static_cast<double>(decode_weight_bytes(model)) + decode_kv_bytes(model.config(), 18.5);
  EXPECT_DOUBLE_EQ(json["decode"]["bandwidth_fraction"].get<double>(), bytes * 500 / 2.5e12);
  EXPECT_TRUE(json["decode"]["bandwidth_fraction_of_best_pass"].is_null());
  EXPECT_TRUE(json["decode"]["bandwidth_fraction_per_token"].is_null());

  // Every batch size, the first also as "batch".
  ASSERT_EQ(json["batches"].size(), 2u);
  EXPECT_EQ(json["batch"], json["batches"][0]);
  EXPECT_EQ(json["batches"][1]["sequences"], 32);
  EXPECT_EQ(json["batches"][1]["speedup_vs_single_sequence"], 18);
}

}  // namespace
}  // namespace kipp::cli
