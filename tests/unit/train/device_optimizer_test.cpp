// The trainer's device-optimizer path (train/device_optimizer.h) against its host path: a model
// whose "device" is a second host copy of the state, doing exactly what the host path does, must
// give a run whose checkpoints are bitwise the CPU run's, through clipping, evaluation, an
// interruption and a resume; and the trainer must never hand it the host's gradient buffer.
#include "train/device_optimizer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/train_config.h"
#include "train/trainer.h"
#include "train/training_model.h"
#include "unit/helpers/tokenizer_fixtures.h"

namespace kipp::train {
namespace {

namespace fs = std::filesystem;

// What the fake device was asked to do over a run.
struct DeviceCalls {
  int loads = 0, stores = 0, steps = 0, host_gradient_passes = 0;
};

class HostDevice final : public TrainingModel, public DeviceOptimizer {
 public:
  HostDevice(const ParameterLayout& layout, std::unique_ptr<TrainingModel> inner, DeviceCalls& calls)
      : layout_(layout), inner_(std::move(inner)), calls_(calls) {}

  Expected<LossSums> forward_backward(std::span<const float> params, const TokenBatch& batch, float grad_scale,
                                      std::span<float> grads) override {
    ++calls_.host_gradient_passes;
    return inner_->forward_backward(params, batch, grad_scale, grads);
  }
  void set_gradients_ready(GradientsReady ready) override { inner_->set_gradients_ready(std::move(ready)); }
  Expected<LossSums> evaluate(std::span<const float> params, const TokenBatch& batch) override {
    return inner_->evaluate(params, batch);
  }
  Status logits(std::span<const float> params, std::span<const int32_t> inputs, uint32_t batch, uint32_t seq_len,
                std::span<float> out) override {
    return inner_->logits(params, inputs, batch, seq_len, out);
  }
  uint64_t workspace_bytes() const override { return inner_->workspace_bytes(); }
  DeviceOptimizer* device_optimizer() override { return this; }

  Status load(std::span<const float> params, const AdamW& optimizer) override {
    ++calls_.loads;
    params_.assign(params.begin(), params.end());
    grads_.assign(params.size(), 0.0f);
    adam_ = std::make_unique<AdamW>(layout_.tensors(), optimizer.options());
    std::copy(optimizer.first_moment().begin(), optimizer.first_moment().end(), adam_->first_moment().begin());
    std::copy(optimizer.second_moment().begin(), optimizer.second_moment().end(), adam_->second_moment().begin());
    return {};
  }
  Status store(std::span<float> params, AdamW& optimizer) override {
    ++calls_.stores;
    std::copy(params_.begin(), params_.end(), params.begin());
    std::copy(adam_->first_moment().begin(), adam_->first_moment().end(), optimizer.first_moment().begin());
    std::copy(adam_->second_moment().begin(), adam_->second_moment().end(), optimizer.second_moment().begin());
    return {};
  }
  Status clear_gradients() override {
    std::fill(grads_.begin(), grads_.end(), 0.0f);
    return {};
  }
  Expected<LossSums> accumulate(const TokenBatch& batch, float grad_scale) override {
    return inner_->forward_backward(params_, batch, grad_scale, grads_);
  }
  Expected<double> gradient_norm() override { return train::gradient_norm(grads_); }
  Status scale_gradients(float factor) override {
    train::scale_gradients(grads_, factor);
    return {};
  }
  Status step(double lr, uint64_t step_number) override {
    ++calls_.steps;
    adam_->set_steps_taken(step_number - 1);
    adam_->step(params_, grads_, lr);
    return {};
  }

 private:
  const ParameterLayout& layout_;
  std::unique_ptr<TrainingModel> inner_;
  DeviceCalls& calls_;
  std::vector<float> params_, grads_;
  std::unique_ptr<AdamW> adam_;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class DeviceOptimizerRun : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = testing::qwen_tokenizer_dir(KIPP_SOURCE_DIR);
    ASSERT_TRUE(dir.ok()) << dir.message();
    tokenizer_ = *dir + "/tokenizer.json";
    work_ = fs::temp_directory_path() / ("kipp-device-optimizer-" + std::to_string(getpid()));
    fs::remove_all(work_);
    fs::create_directories(work_);
  }
  void TearDown() override { fs::remove_all(work_); }

  // The tiny test model on the test corpus, with a clip small enough to act on every step.
  TrainConfig config(const std::string& run_dir, const std::string& device) const {
    const std::vector<std::string> overrides = {
        "tokenizer=" + tokenizer_,
        "data.train=[" + std::string(KIPP_SOURCE_DIR) + "/tests/train/corpus.md]",
        "data.cache_dir=" + (work_ / "cache").string(),
        "run.dir=" + (work_ / run_dir).string(),
        "train.device=" + device,
        "train.max_steps=4",
        "train.grad_clip=0.05",
        "eval.every=2",
        "checkpoint.every=4"};
    auto parsed = load_train_config(std::string(KIPP_SOURCE_DIR) + "/tests/train/test_tiny.yaml", overrides);
    EXPECT_TRUE(parsed.ok()) << parsed.message();
    return parsed.ok() ? *parsed : TrainConfig{};
  }

  Expected<LoadedCheckpoint> latest(const std::string& run_dir, const ParameterLayout& layout) const {
    return load_checkpoint(fs::canonical(work_ / run_dir / "latest").string(), layout);
  }

  std::string tokenizer_;
  fs::path work_;
};

TEST_F(DeviceOptimizerRun, MatchesTheHostPathBitwiseThroughAResume) {
  TrainRun cpu_run;
  cpu_run.config = config("cpu", "cpu");
  auto cpu = run_training(cpu_run, {}, nullptr);
  ASSERT_TRUE(cpu.ok()) << cpu.message();
  ASSERT_EQ(cpu->steps, 4u);

  DeviceCalls calls;
  std::unique_ptr<ParameterLayout> layout;
  TrainRun device_run;
  device_run.config = config("device", "cuda");
  device_run.device_model = [&](const ParameterLayout& model_layout,
                                const TrainingModelOptions& options) -> Expected<std::unique_ptr<TrainingModel>> {
    layout = std::make_unique<ParameterLayout>(model_layout);
    KIPP_ASSIGN_OR_RETURN(auto inner, TrainingModel::create(*layout, options));
    return std::unique_ptr<TrainingModel>(std::make_unique<HostDevice>(*layout, std::move(inner), calls));
  };
  device_run.until_step = 3;
  auto first = run_training(device_run, {}, nullptr);
  ASSERT_TRUE(first.ok()) << first.message();
  EXPECT_EQ(first->steps, 3u);
  device_run.until_step.reset();
  device_run.resume = true;
  auto second = run_training(device_run, {}, nullptr);
  ASSERT_TRUE(second.ok()) << second.message();
  EXPECT_EQ(second->steps, 4u);

  EXPECT_EQ(calls.host_gradient_passes, 0) << "the trainer used the host gradient path";
  EXPECT_EQ(calls.loads, 2) << "one load per run() (fresh, then resumed)";
  EXPECT_EQ(calls.steps, 4);
  // The host copy is refreshed only when read after a step: the evaluations at 2 and 4 and the
  // interruption's checkpoint at 3 (the checkpoints at 2, a new best, and 4 follow an evaluation).
  EXPECT_EQ(calls.stores, 3);

  ASSERT_TRUE(layout);
  auto want = latest("cpu", *layout);
  auto got = latest("device", *layout);
  ASSERT_TRUE(want.ok()) << want.message();
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_TRUE(same_bits(got->params, want->params));
  EXPECT_TRUE(same_bits(got->adam_m, want->adam_m));
  EXPECT_TRUE(same_bits(got->adam_v, want->adam_v));
  EXPECT_EQ(got->adam_steps, want->adam_steps);
  EXPECT_EQ(got->state.step, 4u);
  EXPECT_EQ(got->state.best_val_loss, want->state.best_val_loss);
  EXPECT_EQ(got->state.last_val_loss, want->state.last_val_loss);
  EXPECT_EQ(second->final_loss, cpu->final_loss);
}

}  // namespace
}  // namespace kipp::train
