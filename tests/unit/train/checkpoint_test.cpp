// Training checkpoints: a save loads back bitwise (weights, AdamW moments, trainer state with
// its infinities), `latest`/`best` move as documented, pruning keeps what the links name, crash
// leftovers are cleared, a wrong or damaged folder is refused with a message naming the file,
// averaging is the element-wise mean, and the converter accepts what save_checkpoint writes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "convert/converter.h"
#include "core/files.h"
#include "format/safetensors.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/mini_checkpoint.h"
#include "unit/helpers/random_values.h"
#include "unit/helpers/test_assertions.h"

namespace kipp::train {
using kipp::test_support::has_substr;

namespace {

namespace fs = std::filesystem;

std::vector<float> random_values(uint64_t count, uint32_t seed) {
  return test_support::normal_values(count, seed, 0.5f);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) out.push_back(entry.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

struct Snapshot {
  std::vector<float> params, m, v;
  uint64_t adam_steps = 0;
  TrainerState state;
};

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = dir_.path() + "/run";
    // The mini checkpoint's tokenizer fits mini_config's vocabulary, so saved folders convert.
    const std::string hf = dir_.path() + "/hf";
    fs::create_directories(hf);
    ASSERT_TRUE(testing::write_mini_checkpoint(hf).ok());
    tokenizer_json_ = read_text_file(hf + "/tokenizer.json").value();
    tokenizer_config_json_ = read_text_file(hf + "/tokenizer_config.json").value();
  }

  Snapshot snapshot(uint64_t step, uint32_t seed) const {
    Snapshot s;
    s.params = random_values(layout_.total(), seed);
    s.m = random_values(layout_.total(), seed + 1000);
    s.v = random_values(layout_.total(), seed + 2000);
    for (float& value : s.v) value = value * value;
    s.adam_steps = step + 3;
    s.state.step = step;
    s.state.epoch = 2;
    s.state.data_cursor = 11 + step;
    s.state.tokens_seen = 123456789012ULL + step;
    s.state.skipped_steps = 1;
    s.state.rng_state = "epoch_order:seed=7";
    s.state.best_step = step / 2;
    s.state.elapsed_seconds = 12.345678901234567 * double(step);
    return s;
  }

  Expected<std::string> save(const Snapshot& s, bool is_best, uint32_t keep_last = 10) const {
    return save_checkpoint(run_, layout_, data_of(s), is_best, keep_last);
  }

  CheckpointData data_of(const Snapshot& s) const {
    CheckpointData data;
    data.params = s.params;
    data.adam_m = s.m;
    data.adam_v = s.v;
    data.adam_steps = s.adam_steps;
    data.state = s.state;
    data.tokenizer_json = tokenizer_json_;
    data.tokenizer_config_json = tokenizer_config_json_;
    return data;
  }

  std::string link(const char* name) const { return fs::read_symlink(run_ + "/" + name).string(); }
  std::string folder(uint64_t step) const {
    char name[32];
    std::snprintf(name, sizeof name, "step-%08llu", static_cast<unsigned long long>(step));
    return run_ + "/checkpoints/" + name;
  }
  std::string load_error(const std::string& dir, const ParameterLayout& layout) const {
    auto loaded = load_checkpoint(dir, layout);
    EXPECT_FALSE(loaded.ok());
    return loaded.ok() ? std::string() : loaded.message();
  }

  testing::TempDir dir_;
  ParameterLayout layout_{testing::mini_config()};
  std::string run_, tokenizer_json_, tokenizer_config_json_;
};

TEST_F(Checkpoint, SaveLoadsBackBitwise) {
  Snapshot s = snapshot(7, 1);
  s.state.best_val_loss = std::numeric_limits<double>::infinity();
  s.state.last_val_loss = std::numeric_limits<double>::quiet_NaN();
  auto saved = save(s, false);
  ASSERT_TRUE(saved.ok()) << saved.message();
  EXPECT_EQ(*saved, folder(7));
  EXPECT_EQ(entries(*saved),
            (std::vector<std::string>{"config.json", "model.safetensors", "optimizer.safetensors", "tokenizer.json",
                                      "tokenizer_config.json", "trainer_state.json"}));
  EXPECT_EQ(read_text_file(*saved + "/tokenizer.json").value(), tokenizer_json_);
  EXPECT_TRUE(has_substr(read_text_file(*saved + "/trainer_state.json").value(), "\"best_val_loss\": \"Infinity\""));

  auto loaded = load_checkpoint(*saved, layout_);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_TRUE(same_bits(loaded->params, s.params));
  EXPECT_TRUE(same_bits(loaded->adam_m, s.m));
  EXPECT_TRUE(same_bits(loaded->adam_v, s.v));
  EXPECT_EQ(loaded->adam_steps, s.adam_steps);
  const TrainerState& state = loaded->state;
  EXPECT_EQ(state.step, 7u);
  EXPECT_EQ(state.epoch, s.state.epoch);
  EXPECT_EQ(state.data_cursor, s.state.data_cursor);
  EXPECT_EQ(state.tokens_seen, s.state.tokens_seen);
  EXPECT_EQ(state.skipped_steps, s.state.skipped_steps);
  EXPECT_EQ(state.rng_state, s.state.rng_state);
  EXPECT_EQ(state.best_step, s.state.best_step);
  EXPECT_EQ(state.elapsed_seconds, s.state.elapsed_seconds);
  EXPECT_TRUE(std::isinf(state.best_val_loss) && state.best_val_loss > 0);
  EXPECT_TRUE(std::isnan(state.last_val_loss));

  // Finite losses come back exactly, and so does a negative infinity.
  s.state.step = 8;
  s.state.best_val_loss = 0.1 + 0.2;
  s.state.last_val_loss = -std::numeric_limits<double>::infinity();
  ASSERT_TRUE(save(s, false).ok());
  auto finite = load_checkpoint(folder(8), layout_);
  ASSERT_TRUE(finite.ok()) << finite.message();
  EXPECT_EQ(finite->state.best_val_loss, 0.1 + 0.2);
  EXPECT_EQ(finite->state.last_val_loss, -std::numeric_limits<double>::infinity());

  // The weights are also an ordinary HF checkpoint for --init.
  std::vector<float> params(layout_.total());
  const Status status = load_parameters(layout_, folder(8), params);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(same_bits(params, s.params));
}

TEST_F(Checkpoint, OptimizerFileHoldsBothMomentsPerParameter) {
  ASSERT_TRUE(save(snapshot(1, 1), false).ok());
  auto file = SafetensorsFile::open(folder(1) + "/optimizer.safetensors");
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(file->tensors().size(), 2 * layout_.tensors().size());
  const SafetensorsTensor* m = file->find("model.norm.weight.exp_avg");
  const SafetensorsTensor* v = file->find("model.norm.weight.exp_avg_sq");
  ASSERT_TRUE(m && v);
  EXPECT_EQ(m->dtype, SafetensorsDtype::F32);
  EXPECT_EQ(v->shape, layout_.find("model.norm.weight")->shape);
  EXPECT_EQ(file->metadata().at("adam_steps"), "4");
}

TEST_F(Checkpoint, LatestFollowsEverySaveAndBestTheBestOnes) {
  ASSERT_TRUE(save(snapshot(1, 1), true).ok());
  EXPECT_EQ(link("latest"), "checkpoints/step-00000001");
  EXPECT_EQ(link("best"), "checkpoints/step-00000001");
  ASSERT_TRUE(save(snapshot(2, 2), false).ok());
  EXPECT_EQ(link("latest"), "checkpoints/step-00000002");
  EXPECT_EQ(link("best"), "checkpoints/step-00000001");
  ASSERT_TRUE(save(snapshot(3, 3), true).ok());
  EXPECT_EQ(link("latest"), "checkpoints/step-00000003");
  EXPECT_EQ(link("best"), "checkpoints/step-00000003");
  auto through_link = load_checkpoint(run_ + "/latest", layout_);
  ASSERT_TRUE(through_link.ok()) << through_link.message();
  EXPECT_EQ(through_link->state.step, 3u);
  EXPECT_EQ(entries(run_), (std::vector<std::string>{"best", "checkpoints", "latest"}));
}

TEST_F(Checkpoint, KeepLastPrunesTheOldestButNeverBest) {
  ASSERT_TRUE(save(snapshot(1, 1), true, 2).ok());
  for (uint64_t step = 2; step <= 6; ++step) ASSERT_TRUE(save(snapshot(step, uint32_t(step)), false, 2).ok());
  EXPECT_EQ(entries(run_ + "/checkpoints"),
            (std::vector<std::string>{"step-00000001", "step-00000005", "step-00000006"}));
  EXPECT_EQ(link("best"), "checkpoints/step-00000001");
}

TEST_F(Checkpoint, SavingAStepAgainReplacesIt) {
  ASSERT_TRUE(save(snapshot(5, 1), true).ok());
  const Snapshot second = snapshot(5, 2);
  ASSERT_TRUE(save(second, true).ok());
  auto loaded = load_checkpoint(folder(5), layout_);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_TRUE(same_bits(loaded->params, second.params));
  EXPECT_EQ(entries(run_ + "/checkpoints"), (std::vector<std::string>{"step-00000005"}));
}

TEST_F(Checkpoint, CrashLeftoversAreRemoved) {
  ASSERT_TRUE(save(snapshot(1, 1), false).ok());
  ASSERT_TRUE(save(snapshot(2, 2), true).ok());
  const std::string checkpoints = run_ + "/checkpoints";
  // A save killed while writing, a prune killed while deleting, a save killed after its rename
  // but before the links moved, and a link killed before its rename.
  fs::create_directories(checkpoints + "/.step-00000003.tmp-4242");
  ASSERT_TRUE(write_text_file_atomic(checkpoints + "/.step-00000003.tmp-4242/model.safetensors", "partial").ok());
  fs::create_directories(checkpoints + "/.step-00000001.del-4242");
  fs::copy(folder(2), folder(3));
  fs::create_directory_symlink("checkpoints/step-00000003", run_ + "/.latest.tmp-4242");

  const Status status = remove_partial_checkpoints(run_);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(entries(checkpoints), (std::vector<std::string>{"step-00000001", "step-00000002"}));
  EXPECT_EQ(entries(run_), (std::vector<std::string>{"best", "checkpoints", "latest"}));
  EXPECT_TRUE(load_checkpoint(run_ + "/latest", layout_).ok());

  // A run without checkpoints has nothing to clear.
  EXPECT_TRUE(remove_partial_checkpoints(dir_.path() + "/nothing").ok());
}

TEST_F(Checkpoint, LoadRefusesAnotherModel) {
  ASSERT_TRUE(save(snapshot(1, 1), false).ok());
  ModelConfig deeper = testing::mini_config();
  deeper.num_layers = 2;
  deeper.tie_embeddings = false;
  const std::string error = load_error(folder(1), ParameterLayout(deeper));
  EXPECT_TRUE(has_substr(error, folder(1) + "/config.json describes another model: num_hidden_layers 1 (expected 2), "
                                            "tie_word_embeddings true (expected false)"));
}

TEST_F(Checkpoint, LoadRefusesATruncatedModel) {
  ASSERT_TRUE(save(snapshot(1, 1), false).ok());
  const std::string model = folder(1) + "/model.safetensors";
  fs::resize_file(model, fs::file_size(model) - 100);
  EXPECT_TRUE(has_substr(load_error(folder(1), layout_), model + ": "));
}

TEST_F(Checkpoint, LoadRefusesAMissingOrIncompleteOptimizer) {
  ASSERT_TRUE(save(snapshot(1, 1), false).ok());
  const std::string optimizer = folder(1) + "/optimizer.safetensors";
  fs::remove(optimizer);
  EXPECT_TRUE(has_substr(load_error(folder(1), layout_),
                         optimizer + " is missing: this folder has weights but no optimizer state, so it cannot "
                                     "be resumed"));

  // Moments of one tensor only.
  const ParamTensor& norm = *layout_.find("model.norm.weight");
  const std::vector<float> zeros(norm.count);
  const auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(zeros.data()), zeros.size() * 4);
  ASSERT_TRUE(write_safetensors(optimizer, {{norm.name + ".exp_avg", SafetensorsDtype::F32, norm.shape, bytes}},
                                {{"adam_steps", "1"}})
                  .ok());
  EXPECT_TRUE(
      has_substr(load_error(folder(1), layout_), optimizer + ": tensor model.embed_tokens.weight.exp_avg is missing"));
}

TEST_F(Checkpoint, LoadRefusesADamagedTrainerState) {
  ASSERT_TRUE(save(snapshot(1, 1), false).ok());
  const std::string path = folder(1) + "/trainer_state.json";
  std::string text = read_text_file(path).value();
  text.replace(text.find("\"tokens_seen\""), std::strlen("\"tokens_seen\""), "\"tokens\"");
  ASSERT_TRUE(write_text_file_atomic(path, text).ok());
  EXPECT_TRUE(has_substr(load_error(folder(1), layout_), path + ": missing field 'tokens_seen'"));
}

TEST_F(Checkpoint, AverageIsTheElementwiseMean) {
  const Snapshot a = snapshot(1, 1), b = snapshot(2, 2);
  ASSERT_TRUE(save(a, false).ok());
  ASSERT_TRUE(save(b, false).ok());
  const std::string out = dir_.path() + "/averaged";
  const Status status = average_checkpoints({folder(1), folder(2)}, out);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(entries(out),
            (std::vector<std::string>{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}));
  EXPECT_EQ(entries(dir_.path()), (std::vector<std::string>{"averaged", "hf", "run"}));  // no temporary left

  std::vector<float> mean(layout_.total());
  const Status loaded = load_parameters(layout_, out, mean);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  std::vector<float> expected(layout_.total());
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = float((double(a.params[i]) + double(b.params[i])) / 2);
  EXPECT_TRUE(same_bits(mean, expected));

  EXPECT_TRUE(has_substr(average_checkpoints({folder(1), folder(2)}, out).message(), out + " already exists"));
  ASSERT_TRUE(average_checkpoints({folder(1), folder(2)}, out + "-again/").ok());
  EXPECT_EQ(read_text_file(out + "-again/model.safetensors").value(),
            read_text_file(out + "/model.safetensors").value());
  EXPECT_TRUE(has_substr(average_checkpoints({folder(1)}, dir_.path() + "/one").message(), "at least two"));
}

TEST_F(Checkpoint, AverageRefusesCheckpointsOfDifferentModels) {
  ASSERT_TRUE(save(snapshot(1, 1), false).ok());
  ModelConfig other_config = testing::mini_config();
  other_config.rope_theta = 10000;
  const ParameterLayout other(other_config);
  const std::vector<float> params = random_values(other.total(), 3);
  const std::string other_dir = dir_.path() + "/other";
  ASSERT_TRUE(write_model_folder(other_dir, other, params, tokenizer_json_, "").ok());
  const Status status = average_checkpoints({folder(1), other_dir}, dir_.path() + "/avg");
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(has_substr(status.message(), other_dir + "/config.json differs from " + folder(1) + "/config.json"));
  EXPECT_FALSE(fs::exists(dir_.path() + "/avg"));
}

TEST_F(Checkpoint, ConfigJsonParsesToTheSameModelConfig) {
  ModelConfig untied = testing::mini_config();
  untied.tie_embeddings = false;
  untied.rms_norm_eps = 1.0e-5;
  untied.rope_theta = 12345.678;
  untied.context_length = 4096;
  for (const ModelConfig& config : {testing::mini_config(), untied}) {
    const std::string text = hf_config_json(config);
    auto parsed = parse_hf_config(text);
    ASSERT_TRUE(parsed.ok()) << parsed.message() << "\n" << text;
    EXPECT_TRUE(*parsed == config) << text;
    EXPECT_TRUE(has_substr(text, "\"torch_dtype\": \"float32\""));
  }
}

TEST_F(Checkpoint, ConverterAcceptsASavedCheckpoint) {
  ASSERT_TRUE(save(snapshot(4, 1), true).ok());
  ConvertOptions options;
  options.input_dir = run_ + "/latest";
  options.output_path = dir_.path() + "/trained.gguf";
  auto report = convert_checkpoint(options);
  ASSERT_TRUE(report.ok()) << report.message();
  EXPECT_TRUE(report->config == layout_.config());
  auto model = Model::open(options.output_path);
  ASSERT_TRUE(model.ok()) << model.message();
}

}  // namespace
}  // namespace kipp::train

namespace kipp::train {
namespace {

// A LoRA run's checkpoint: a PEFT adapter folder plus the optimizer and trainer state, loading
// back bitwise; full-model and LoRA checkpoints refuse each other, another train.lora is
// refused, and adapters are never averaged.
TEST(LoraCheckpoint, AdaptersAndOptimizerLoadBackBitwiseAndKindsRefuseEachOther) {
  testing::TempDir dir;
  const std::string run = dir.path() + "/run";
  LoraOptions options;
  options.rank = 3;
  options.alpha = 6;
  options.targets = {LoraTarget::K, LoraTarget::Up};
  const AdapterLayout adapters(testing::mini_config(), options);
  const std::vector<float> params = random_values(adapters.total(), 5), m = random_values(adapters.total(), 6);
  std::vector<float> v = random_values(adapters.total(), 7);
  for (float& value : v) value *= value;
  CheckpointData data;
  data.params = params;
  data.adam_m = m;
  data.adam_v = v;
  data.adam_steps = 9;
  data.state.step = 4;
  data.state.rng_state = "window_order seed=1";
  data.tokenizer_json = "{}";
  auto saved = save_checkpoint(run, adapters, "/models/base", data, true, 3);
  ASSERT_TRUE(saved.ok()) << saved.message();
  EXPECT_EQ(entries(*saved),
            (std::vector<std::string>{"adapter_config.json", "adapter_model.safetensors", "optimizer.safetensors",
                                      "tokenizer.json", "trainer_state.json"}));
  EXPECT_EQ(fs::read_symlink(run + "/latest").filename(), "step-00000004");
  EXPECT_EQ(fs::read_symlink(run + "/best").filename(), "step-00000004");
  auto optimizer = SafetensorsFile::open(*saved + "/optimizer.safetensors");
  ASSERT_TRUE(optimizer.ok());
  EXPECT_TRUE(optimizer->find("base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight.exp_avg_sq"));

  auto loaded = load_checkpoint(*saved, adapters);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_TRUE(same_bits(loaded->params, params));
  EXPECT_TRUE(same_bits(loaded->adam_m, m));
  EXPECT_TRUE(same_bits(loaded->adam_v, v));
  EXPECT_EQ(loaded->adam_steps, 9u);
  EXPECT_EQ(loaded->state.step, 4u);
  EXPECT_EQ(loaded->state.rng_state, "window_order seed=1");

  LoraOptions other = options;
  other.alpha = 7;
  auto mismatched = load_checkpoint(*saved, AdapterLayout(testing::mini_config(), other));
  ASSERT_FALSE(mismatched.ok());
  EXPECT_TRUE(has_substr(mismatched.message(), "another train.lora")) << mismatched.message();
  auto as_model = load_checkpoint(*saved, ParameterLayout(testing::mini_config()));
  ASSERT_FALSE(as_model.ok());
  EXPECT_TRUE(has_substr(as_model.message(), "holds LoRA adapters, not a model")) << as_model.message();

  data.state.step = 5;
  ASSERT_TRUE(save_checkpoint(run, adapters, "/models/base", data, false, 3).ok());
  const Status averaged = average_checkpoints({run + "/checkpoints/step-00000004", run + "/checkpoints/step-00000005"},
                                              dir.path() + "/avg");
  ASSERT_FALSE(averaged.ok());
  EXPECT_TRUE(has_substr(averaged.message(), "holds LoRA adapters: they cannot be averaged")) << averaged.message();
  EXPECT_FALSE(fs::exists(dir.path() + "/avg"));
}

}  // namespace
}  // namespace kipp::train
