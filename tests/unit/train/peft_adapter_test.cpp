// PEFT adapter folders: ours carry PEFT's config fields and tensor names and read back bit for
// bit; folders PEFT writes (".default" names, BF16) load; every mismatch with the base is an
// error naming the tensor.
#include "train/peft_adapter.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/half.h"
#include "format/safetensors.h"
#include "unit/helpers/test_assertions.h"

namespace kipp::train {
namespace {

namespace fs = std::filesystem;
using kipp::test_support::has_substr;
using nlohmann::json;

ModelConfig small_config() {
  return ModelConfig{.hidden_size = 64,
                     .num_layers = 2,
                     .num_heads = 4,
                     .num_kv_heads = 2,
                     .head_dim = 16,
                     .ffn_size = 96,
                     .vocab_size = 100,
                     .context_length = 128,
                     .rope_theta = 10000,
                     .rms_norm_eps = 1e-6,
                     .tie_embeddings = true};
}

class PeftAdapterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("kipp_peft_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

LoraOptions options(uint32_t rank, std::vector<LoraTarget> targets) {
  LoraOptions out;
  out.rank = rank;
  out.alpha = 12;
  out.dropout = 0.05;
  out.targets = std::move(targets);
  return out;
}

std::vector<float> ramp(uint64_t count) {
  std::vector<float> out(count);
  for (uint64_t i = 0; i < count; ++i) out[i] = float(i) * 0.001f - 0.5f;
  return out;
}

TEST_F(PeftAdapterTest, SavedFolderHasPeftFieldsNamesAndReadsBackExactly) {
  const AdapterLayout layout(small_config(), options(4, {LoraTarget::Down, LoraTarget::Q}));
  const std::vector<float> values = ramp(layout.total());
  ASSERT_TRUE(save_peft_adapter(dir_, layout, values, "/models/base").ok());

  const json config = json::parse(*read_text_file(dir_ + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["task_type"], "CAUSAL_LM");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["lora_alpha"], 12.0);
  EXPECT_EQ(config["lora_dropout"], 0.05);
  EXPECT_EQ(config["target_modules"], json({"q_proj", "down_proj"}));
  EXPECT_EQ(config["bias"], "none");
  EXPECT_EQ(config["fan_in_fan_out"], false);
  EXPECT_EQ(config["base_model_name_or_path"], "/models/base");
  EXPECT_EQ(config["inference_mode"], true);
  EXPECT_EQ(config["use_rslora"], false);
  EXPECT_TRUE(config["modules_to_save"].is_null());
  EXPECT_EQ(config["init_lora_weights"], true);

  auto file = SafetensorsFile::open(dir_ + "/adapter_model.safetensors");
  ASSERT_TRUE(file.ok()) << file.message();
  ASSERT_EQ(file->tensors().size(), 8u);  // 2 layers x 2 targets x (A, B)
  const SafetensorsTensor* a = file->find("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight");
  const SafetensorsTensor* b = file->find("base_model.model.model.layers.0.mlp.down_proj.lora_B.weight");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->dtype, SafetensorsDtype::F32);
  EXPECT_EQ(a->shape, (std::vector<uint64_t>{4, 64}));  // [r, hidden]
  EXPECT_EQ(b->shape, (std::vector<uint64_t>{64, 4}));  // [hidden, r]

  auto loaded = load_peft_adapter(dir_, small_config());
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  LoraOptions canonical = layout.options();  // target_modules in the model's order
  canonical.targets = {LoraTarget::Q, LoraTarget::Down};
  EXPECT_EQ(loaded->options, canonical);
  EXPECT_EQ(loaded->base_model, "/models/base");
  EXPECT_EQ(loaded->values, values);
}

// The files PEFT's save_pretrained writes for a model still holding its "default" adapter, in BF16.
TEST_F(PeftAdapterTest, ReadsPeftNamesWithTheAdapterNameAndBf16Values) {
  const AdapterLayout layout(small_config(), options(2, {LoraTarget::V}));
  fs::create_directories(dir_);
  ASSERT_TRUE(write_text_file_atomic(dir_ + "/adapter_config.json",
                                     R"({"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["v_proj"],
                                         "bias": "none", "use_rslora": false, "modules_to_save": null,
                                         "base_model_name_or_path": "Qwen/Qwen3-0.6B", "lora_dropout": 0.0})")
                  .ok());
  std::vector<std::vector<uint16_t>> bits;
  std::vector<SafetensorsWriteTensor> tensors;
  for (const ParamTensor& t : layout.tensors()) {
    bits.emplace_back(t.count);
    for (uint64_t i = 0; i < t.count; ++i) bits.back()[i] = f32_to_bf16(float(i) * 0.25f);
    const std::string name = t.name.substr(0, t.name.size() - 7) + ".default.weight";
    tensors.push_back(
        {name, SafetensorsDtype::BF16, t.shape, {reinterpret_cast<const uint8_t*>(bits.back().data()), t.count * 2}});
  }
  ASSERT_TRUE(write_safetensors(dir_ + "/adapter_model.safetensors", tensors).ok());

  auto loaded = load_peft_adapter(dir_, small_config());
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(loaded->options.rank, 2u);
  EXPECT_EQ(loaded->options.scale(), 2.0);
  EXPECT_EQ(loaded->options.targets, std::vector<LoraTarget>{LoraTarget::V});
  for (const ParamTensor& t : layout.tensors()) {
    for (uint64_t i = 0; i < t.count; ++i) ASSERT_EQ(loaded->values[t.offset + i], float(i) * 0.25f) << t.name;
  }
}

TEST_F(PeftAdapterTest, AnAdapterForAnotherShapeNamesTheTensor) {
  ModelConfig wider = small_config();
  wider.ffn_size = 128;
  const AdapterLayout layout(wider, options(4, {LoraTarget::Up}));
  ASSERT_TRUE(save_peft_adapter(dir_, layout, ramp(layout.total()), "").ok());
  auto loaded = load_peft_adapter(dir_, small_config());
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(has_substr(loaded.message(),
                         "tensor base_model.model.model.layers.0.mlp.up_proj.lora_B.weight has "
                         "shape [128, 4], but the base's [out, r] is [96, 4]"))
      << loaded.message();

  ModelConfig deeper = small_config();
  deeper.num_layers = 3;
  auto missing = load_peft_adapter(dir_, deeper);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(has_substr(missing.message(), "tensor base_model.model.model.layers.0.mlp.up_proj.lora_B.weight"))
      << missing.message();

  ModelConfig shallower = wider;
  shallower.num_layers = 1;
  auto extra = load_peft_adapter(dir_, shallower);
  ASSERT_FALSE(extra.ok());
  EXPECT_TRUE(has_substr(extra.message(),
                         "tensor base_model.model.model.layers.1.mlp.up_proj.lora_A.weight is not "
                         "an adapter of this base"))
      << extra.message();
}

TEST_F(PeftAdapterTest, MissingFilesAndUnsupportedOptionsAreOneErrorEach) {
  auto none = load_peft_adapter(dir_, small_config());
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(has_substr(none.message(), "adapter_config.json")) << none.message();

  const AdapterLayout layout(small_config(), options(4, {LoraTarget::K}));
  ASSERT_TRUE(save_peft_adapter(dir_, layout, ramp(layout.total()), "").ok());
  auto edit = [&](const std::string& key, const json& value) {
    json config = json::parse(*read_text_file(dir_ + "/adapter_config.json"));
    config[key] = value;
    ASSERT_TRUE(write_text_file_atomic(dir_ + "/adapter_config.json", config.dump()).ok());
  };
  auto error = [&] {
    auto loaded = load_peft_adapter(dir_, small_config());
    return loaded.ok() ? std::string() : loaded.message();
  };
  edit("use_rslora", true);
  EXPECT_TRUE(has_substr(error(), "'use_rslora' is true (rank-stabilized scaling alpha / sqrt(r))")) << error();
  edit("use_rslora", false);
  edit("target_modules", json({"k_proj", "lm_head"}));
  EXPECT_TRUE(has_substr(error(), "target_modules: 'lm_head' is not a LoRA target")) << error();
  edit("target_modules", json({"k_proj"}));
  edit("peft_type", "IA3");
  EXPECT_TRUE(has_substr(error(), "'peft_type' is \"IA3\" (expected \"LORA\")")) << error();
  edit("peft_type", "LORA");
  edit("r", 0);
  EXPECT_TRUE(has_substr(error(), "'r' must be a positive integer, found 0")) << error();
  edit("r", 4);
  EXPECT_EQ(error(), "");
  fs::remove(dir_ + "/adapter_model.safetensors");
  EXPECT_TRUE(has_substr(error(), "adapter_model.safetensors")) << error();
}

}  // namespace
}  // namespace kipp::train
