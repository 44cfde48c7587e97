// The LoRA training model's own properties on a tiny HF folder base: the base is held as BF16
// and nothing more (no FP32 copy), zero B leaves the base's logits whatever A and the targets
// are, those logits are the full FP32 model's on the same BF16 weights within the BF16 rounding
// of the activations, AdamW on the adapters fits one batch, and bad input is an error.
// Agreement with PyTorch autograd is the lora_gates integration test's job.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "core/files.h"
#include "core/half.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/frozen_base.h"
#include "train/lora.h"
#include "train/parameters.h"
#include "train/training_model.h"

namespace {

using namespace kipp;
using namespace kipp::train;
namespace fs = std::filesystem;

constexpr uint32_t kBatch = 2, kSeqLen = 8;

ModelConfig tiny_config() {
  ModelConfig c;
  c.hidden_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.ffn_size = 96;
  c.vocab_size = 64;
  c.context_length = 64;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-6;
  c.tie_embeddings = true;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

class LoraModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("lora_model_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const ParameterLayout layout(config_);
    params_.resize(layout.total());
    init_parameters(layout, {.seed = 5, .std = 0.1}, params_);
    // The values a BF16 base holds, so the full model below multiplies the same weights.
    for (float& v : params_) v = bf16_to_f32(f32_to_bf16(v));
    ASSERT_TRUE(write_text_file_atomic((dir_ / "config.json").string(), hf_config_json(config_)).ok());
    ASSERT_TRUE(save_parameters(layout, params_, (dir_ / "model.safetensors").string()).ok());
    auto base = FrozenBase::open(config_, dir_.string());
    ASSERT_TRUE(base.ok()) << base.message();
    base_ = std::move(*base);
    std::mt19937 rng(1);
    for (uint32_t i = 0; i < kBatch * kSeqLen; ++i) {
      inputs_.push_back(int32_t(rng() % config_.vocab_size));
      targets_.push_back(int32_t(rng() % config_.vocab_size));
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<TrainingModel> model(const AdapterLayout& adapters) const {
    TrainingModelOptions options;
    options.max_batch = kBatch;
    options.seq_len = kSeqLen;
    auto created = TrainingModel::create_lora(*base_, adapters, options);
    EXPECT_TRUE(created.ok()) << created.message();
    return created.ok() ? std::move(*created) : nullptr;
  }

  std::vector<float> zero_b_logits(const std::vector<LoraTarget>& targets, uint64_t seed) const {
    const AdapterLayout layout(config_, {4, 8.0, 0.0, targets});
    std::vector<float> adapters(layout.total());
    init_adapters(layout, seed, adapters);
    std::vector<float> logits(size_t{kBatch} * kSeqLen * config_.vocab_size);
    auto m = model(layout);
    EXPECT_TRUE(m && m->logits(adapters, inputs_, kBatch, kSeqLen, logits).ok());
    return logits;
  }

  ModelConfig config_ = tiny_config();
  fs::path dir_;
  std::vector<float> params_;
  std::unique_ptr<FrozenBase> base_;
  std::vector<int32_t> inputs_, targets_;
};

TEST_F(LoraModelTest, HoldsTheBaseAsBf16Only) {
  EXPECT_EQ(base_->storage(), "bf16");
  const ModelConfig& c = config_;
  auto matrix = [](uint64_t rows, uint64_t cols) { return (rows * cols * 2 + 63) / 64 * 64; };
  uint64_t expected = matrix(c.vocab_size, c.hidden_size);  // the tied embedding and head, once
  uint64_t gains = c.hidden_size;
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    expected += matrix(c.q_width(), c.hidden_size) + 2 * matrix(c.kv_width(), c.hidden_size) +
                matrix(c.hidden_size, c.q_width()) + 2 * matrix(c.ffn_size, c.hidden_size) +
                matrix(c.hidden_size, c.ffn_size);
    gains += 2 * c.hidden_size + 2 * c.head_dim;
  }
  EXPECT_EQ(base_->bytes(), expected + gains * sizeof(float));
}

TEST_F(LoraModelTest, ZeroBGivesTheBaseLogits) {
  const std::vector<float> all = zero_b_logits({kAllLoraTargets.begin(), kAllLoraTargets.end()}, 3);
  const std::vector<float> one = zero_b_logits({LoraTarget::Down}, 4);
  ASSERT_EQ(all.size(), one.size());
  EXPECT_EQ(std::memcmp(all.data(), one.data(), all.size() * sizeof(float)), 0);

  TrainingModelOptions options;
  options.max_batch = kBatch;
  options.seq_len = kSeqLen;
  auto full = TrainingModel::create(ParameterLayout(config_), options);
  ASSERT_TRUE(full.ok());
  std::vector<float> reference(all.size());
  ASSERT_TRUE((*full)->logits(params_, inputs_, kBatch, kSeqLen, reference).ok());
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double(reference[i])));
    max_diff = std::max(max_diff, std::fabs(double(all[i]) - double(reference[i])));
  }
  // The fast kernels round the activations to BF16 (8 bits of mantissa).
  EXPECT_LT(max_diff, 2e-2 * max_ref);
}

TEST_F(LoraModelTest, AdaptersFitOneBatch) {
  const AdapterLayout layout(config_, {8, 16.0, 0.1, {kAllLoraTargets.begin(), kAllLoraTargets.end()}});
  std::vector<float> adapters(layout.total()), grads(layout.total());
  init_adapters(layout, 9, adapters);
  auto m = model(layout);
  ASSERT_TRUE(m);
  AdamW optimizer(layout.tensors(), AdamWOptions{});
  const TokenBatch batch{inputs_, targets_, kBatch, kSeqLen, 0};
  auto first = m->evaluate(adapters, batch);
  ASSERT_TRUE(first.ok());
  for (uint64_t step = 0; step < 60; ++step) {
    std::fill(grads.begin(), grads.end(), 0.0f);
    const TokenBatch noisy{inputs_, targets_, kBatch, kSeqLen, step};
    ASSERT_TRUE(m->forward_backward(adapters, noisy, 1.0f / float(kBatch * kSeqLen), grads).ok());
    optimizer.step(adapters, grads, 1e-2);
  }
  auto last = m->evaluate(adapters, batch);
  ASSERT_TRUE(last.ok());
  EXPECT_LT(last->loss_sum, 0.5 * first->loss_sum);
}

// Data-parallel training sums each layer's adapter gradients as soon as they are reported: the
// slices, last layer first, tile the whole adapter buffer and hold their final values when told.
TEST_F(LoraModelTest, ReportsEachLayersFinalAdapterGradients) {
  const AdapterLayout layout(config_, {4, 8.0, 0.0, {LoraTarget::Q, LoraTarget::V, LoraTarget::Down}});
  std::vector<float> adapters(layout.total()), grads(layout.total(), 0.0f);
  init_adapters(layout, 3, adapters);
  for (float& v : adapters) v += 0.01f;  // B non-zero too, so A has gradients
  auto m = model(layout);
  ASSERT_TRUE(m);
  std::vector<BufferSlice> slices;
  std::vector<std::vector<float>> seen;
  m->set_gradients_ready([&](uint64_t offset, uint64_t count) {
    slices.push_back({offset, count});
    seen.emplace_back(grads.begin() + long(offset), grads.begin() + long(offset + count));
  });
  ASSERT_TRUE(m->forward_backward(adapters, {inputs_, targets_, kBatch, kSeqLen, 0}, 0.1f, grads).ok());
  ASSERT_EQ(slices.size(), size_t{config_.num_layers});
  uint64_t end = layout.total();
  for (size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(slices[i].offset + slices[i].count, end) << "slice " << i;
    end = slices[i].offset;
    const std::vector<float> final_grads(grads.begin() + long(slices[i].offset),
                                         grads.begin() + long(slices[i].offset + slices[i].count));
    EXPECT_EQ(seen[i], final_grads) << "slice " << i << " changed after it was reported";
    EXPECT_TRUE(std::any_of(final_grads.begin(), final_grads.end(), [](float g) { return g != 0.0f; }));
  }
  EXPECT_EQ(end, 0u);
}

TEST_F(LoraModelTest, BadInputIsAnError) {
  const AdapterLayout layout(config_, {4, 8.0, 0.0, {LoraTarget::Q}});
  auto m = model(layout);
  ASSERT_TRUE(m);
  std::vector<float> short_buffer(layout.total() - 1), grads(layout.total());
  EXPECT_FALSE(m->forward_backward(short_buffer, {inputs_, targets_, kBatch, kSeqLen, 0}, 1.0f, grads).ok());

  TrainingModelOptions options;
  options.max_batch = kBatch;
  options.seq_len = kSeqLen;
  EXPECT_FALSE(
      TrainingModel::create_lora(*base_, AdapterLayout(config_, {4, 8.0, 1.0, {LoraTarget::Q}}), options).ok());
  EXPECT_FALSE(TrainingModel::create_lora(*base_, AdapterLayout(config_, {0, 8.0, 0.0, {}}), options).ok());
  ModelConfig other = config_;
  other.ffn_size = 128;
  EXPECT_FALSE(TrainingModel::create_lora(*base_, AdapterLayout(other, {4, 8.0, 0.0, {LoraTarget::Q}}), options).ok());

  other = config_;
  other.hidden_size = 128;
  EXPECT_FALSE(FrozenBase::open(other, dir_.string()).ok());
  EXPECT_FALSE(FrozenBase::open(config_, (dir_ / "missing").string()).ok());
}

}  // namespace
