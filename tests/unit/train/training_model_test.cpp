// The training model's own properties on tiny configs: it can fit one batch, recomputing blocks
// changes nothing, runs are deterministic, micro-batches add up to the full batch, logits() is
// what the loss sees, causality, shorter rows, and bad input is an error rather than a crash.
// Agreement with PyTorch autograd is the train_gates integration test's job.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "train/adamw.h"
#include "train/parameters.h"
#include "train/training_model.h"

namespace {

using namespace kipp;
using namespace kipp::train;

ModelConfig tiny_config(bool tied) {
  ModelConfig c;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.ffn_size = 64;
  c.vocab_size = 48;
  c.context_length = 64;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-6;
  c.tie_embeddings = tied;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

std::vector<float> initial_parameters(const ParameterLayout& layout, uint64_t seed = 7) {
  std::vector<float> params(layout.total());
  InitOptions init;
  init.seed = seed;
  init_parameters(layout, init, params);
  return params;
}

// Rows of next-token pairs from one random stream; every fifth target masked when `masked`.
struct Batch {
  std::vector<int32_t> inputs, targets;
  uint32_t batch = 0, seq_len = 0;
  TokenBatch view() const { return {inputs, targets, batch, seq_len}; }
  // Rows [first, first + count) as their own batch.
  Batch rows(uint32_t first, uint32_t count) const {
    Batch b;
    b.batch = count;
    b.seq_len = seq_len;
    const auto begin = static_cast<long>(first * seq_len), end = static_cast<long>((first + count) * seq_len);
    b.inputs.assign(inputs.begin() + begin, inputs.begin() + end);
    b.targets.assign(targets.begin() + begin, targets.begin() + end);
    return b;
  }
};

Batch random_batch(uint32_t batch, uint32_t seq_len, uint32_t vocab, bool masked, uint32_t seed = 11) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab) - 1);
  Batch b;
  b.batch = batch;
  b.seq_len = seq_len;
  for (uint32_t r = 0; r < batch; ++r) {
    std::vector<int32_t> stream(seq_len + 1);
    for (int32_t& t : stream) t = id(rng);
    for (uint32_t i = 0; i < seq_len; ++i) {
      b.inputs.push_back(stream[i]);
      b.targets.push_back(masked && (r * seq_len + i) % 5 == 0 ? kIgnoreTarget : stream[i + 1]);
    }
  }
  return b;
}

std::unique_ptr<TrainingModel> make_model(const ParameterLayout& layout, uint32_t max_batch, uint32_t seq_len,
                                          bool recompute = false, Precision precision = Precision::Fp32) {
  TrainingModelOptions options;
  options.max_batch = max_batch;
  options.seq_len = seq_len;
  options.recompute_blocks = recompute;
  options.precision = precision;
  auto model = TrainingModel::create(layout, options);
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.message());
  return model.ok() ? std::move(*model) : nullptr;
}

struct StepResult {
  LossSums sums;
  std::vector<float> grads;
};

StepResult run_step(TrainingModel& model, const ParameterLayout& layout, const std::vector<float>& params,
                    const Batch& batch, float grad_scale) {
  StepResult run;
  run.grads.assign(layout.total(), 0.0f);
  auto sums = model.forward_backward(params, batch.view(), grad_scale, run.grads);
  EXPECT_TRUE(sums.ok()) << (sums.ok() ? "" : sums.message());
  if (sums.ok()) run.sums = *sums;
  return run;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(TrainingModel, OverfitsOneBatch) {
  const ParameterLayout layout(tiny_config(true));
  std::vector<float> params = initial_parameters(layout);
  const Batch batch = random_batch(2, 16, layout.config().vocab_size, false);
  auto model = make_model(layout, 2, 16);
  ASSERT_TRUE(model);
  AdamWOptions adam;
  adam.weight_decay = 0.0;
  AdamW optimizer(layout.tensors(), adam);
  std::vector<float> grads(layout.total());
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    std::fill(grads.begin(), grads.end(), 0.0f);
    auto sums = model->forward_backward(params, batch.view(), 1.0f / 32, grads);
    ASSERT_TRUE(sums.ok()) << sums.message();
    const double mean = sums->loss_sum / double(sums->counted);
    if (step == 0) first = mean;
    last = mean;
    clip_gradient_norm(grads, 1.0);
    optimizer.step(params, grads, 3e-3);
  }
  EXPECT_NEAR(first, std::log(double(layout.config().vocab_size)), 0.3);
  EXPECT_LT(last, 0.05) << "first " << first;
}

TEST(TrainingModel, RecomputeBlocksIsBitwiseEqual) {
  for (bool tied : {true, false}) {
    const ParameterLayout layout(tiny_config(tied));
    const std::vector<float> params = initial_parameters(layout);
    const Batch batch = random_batch(3, 20, layout.config().vocab_size, true);
    auto plain = make_model(layout, 3, 20, false);
    auto recompute = make_model(layout, 3, 20, true);
    ASSERT_TRUE(plain && recompute);
    const StepResult a = run_step(*plain, layout, params, batch, 0.25f);
    const StepResult b = run_step(*recompute, layout, params, batch, 0.25f);
    EXPECT_EQ(a.sums.loss_sum, b.sums.loss_sum) << "tied " << tied;
    EXPECT_EQ(a.sums.counted, b.sums.counted);
    EXPECT_TRUE(bitwise_equal(a.grads, b.grads)) << "tied " << tied;
    EXPECT_LT(recompute->workspace_bytes(), plain->workspace_bytes());
  }
}

// The same step twice on one model and once on another gives bitwise the same loss and gradients.
void expect_deterministic_runs(Precision precision) {
  const ParameterLayout layout(tiny_config(false));
  const std::vector<float> params = initial_parameters(layout);
  const Batch batch = random_batch(3, 20, layout.config().vocab_size, true);
  auto first = make_model(layout, 3, 20, false, precision);
  auto second = make_model(layout, 3, 20, false, precision);
  ASSERT_TRUE(first && second);
  const StepResult a = run_step(*first, layout, params, batch, 1.0f);
  const StepResult b = run_step(*first, layout, params, batch, 1.0f);
  const StepResult c = run_step(*second, layout, params, batch, 1.0f);
  EXPECT_EQ(a.sums.loss_sum, b.sums.loss_sum);
  EXPECT_EQ(a.sums.loss_sum, c.sums.loss_sum);
  EXPECT_TRUE(bitwise_equal(a.grads, b.grads));
  EXPECT_TRUE(bitwise_equal(a.grads, c.grads));
}

TEST(TrainingModel, RunsAreDeterministic) { expect_deterministic_runs(Precision::Fp32); }

TEST(TrainingModel, MicroBatchesAddUpToTheFullBatch) {
  const ParameterLayout layout(tiny_config(true));
  const std::vector<float> params = initial_parameters(layout);
  const Batch full = random_batch(4, 16, layout.config().vocab_size, true);
  auto model = make_model(layout, 4, 16);
  ASSERT_TRUE(model);
  const StepResult whole = run_step(*model, layout, params, full, 1.0f);
  const auto scale = static_cast<float>(1.0 / double(whole.sums.counted));
  const StepResult reference = run_step(*model, layout, params, full, scale);

  std::vector<float> grads(layout.total(), 0.0f);
  LossSums total;
  for (uint32_t first : {0u, 2u}) {
    const Batch half = full.rows(first, 2);
    auto sums = model->forward_backward(params, half.view(), scale, grads);
    ASSERT_TRUE(sums.ok()) << sums.message();
    total.loss_sum += sums->loss_sum;
    total.counted += sums->counted;
  }
  EXPECT_EQ(total.counted, reference.sums.counted);
  EXPECT_NEAR(total.loss_sum, reference.sums.loss_sum, 1e-5 * reference.sums.loss_sum);
  for (const ParamTensor& t : layout.tensors()) {
    float max_abs = 0, max_diff = 0;
    for (uint64_t i = t.offset; i < t.offset + t.count; ++i) {
      max_abs = std::max(max_abs, std::fabs(reference.grads[i]));
      max_diff = std::max(max_diff, std::fabs(reference.grads[i] - grads[i]));
    }
    EXPECT_LE(max_diff, 1e-5f * max_abs) << t.name;
    EXPECT_GT(max_abs, 0.0f) << t.name;
  }
}

// The hook data-parallel training starts its gradient sums from: one slice per layer, last layer
// first, each exactly that layer's tensors, already holding its final gradients when reported
// (checked on a second micro-batch, which adds into the first's gradients).
TEST(TrainingModel, ReportsEachLayersFinalGradients) {
  for (bool tied : {true, false}) {
    const ParameterLayout layout(tiny_config(tied));
    const std::vector<float> params = initial_parameters(layout);
    const Batch batch = random_batch(2, 16, layout.config().vocab_size, true);
    auto model = make_model(layout, 1, 16);
    ASSERT_TRUE(model);
    std::vector<float> grads(layout.total(), 0.0f);
    ASSERT_TRUE(model->forward_backward(params, batch.rows(0, 1).view(), 0.5f, grads).ok());
    std::vector<BufferSlice> slices;
    std::vector<std::vector<float>> seen;
    model->set_gradients_ready([&](uint64_t offset, uint64_t count) {
      slices.push_back({offset, count});
      seen.emplace_back(grads.begin() + long(offset), grads.begin() + long(offset + count));
    });
    ASSERT_TRUE(model->forward_backward(params, batch.rows(1, 1).view(), 0.5f, grads).ok());
    const auto& layers = layout.layers();
    ASSERT_EQ(slices.size(), layers.size());
    for (size_t i = 0; i < slices.size(); ++i) {
      const size_t layer = layers.size() - 1 - i;
      const uint64_t end = layer + 1 < layers.size() ? layers[layer + 1].attn_norm : layout.final_norm();
      EXPECT_EQ(slices[i].offset, layers[layer].attn_norm) << "layer " << layer;
      EXPECT_EQ(slices[i].offset + slices[i].count, end) << "layer " << layer;
      const std::vector<float> final_grads(grads.begin() + long(slices[i].offset),
                                           grads.begin() + long(slices[i].offset + slices[i].count));
      EXPECT_TRUE(bitwise_equal(seen[i], final_grads)) << "layer " << layer << " changed after it was reported";
    }
    model->set_gradients_ready({});
  }
}

TEST(TrainingModel, LogitsAreWhatTheLossSees) {
  const ParameterLayout layout(tiny_config(false));
  const std::vector<float> params = initial_parameters(layout);
  const Batch batch = random_batch(2, 24, layout.config().vocab_size, true);
  auto model = make_model(layout, 2, 24);
  ASSERT_TRUE(model);
  const size_t vocab = layout.config().vocab_size;
  std::vector<float> logits(batch.inputs.size() * vocab);
  ASSERT_TRUE(model->logits(params, batch.inputs, batch.batch, batch.seq_len, logits).ok());
  double loss = 0;
  uint64_t counted = 0;
  for (size_t r = 0; r < batch.targets.size(); ++r) {
    if (batch.targets[r] == kIgnoreTarget) continue;
    const float* z = logits.data() + r * vocab;
    double sum = 0;
    for (size_t j = 0; j < vocab; ++j) sum += std::exp(double(z[j]));
    loss += std::log(sum) - double(z[batch.targets[r]]);
    ++counted;
  }
  auto sums = model->evaluate(params, batch.view());
  ASSERT_TRUE(sums.ok()) << sums.message();
  EXPECT_EQ(sums->counted, counted);
  EXPECT_NEAR(sums->loss_sum, loss, 1e-5 * loss);
  // forward_backward reports the same loss as evaluate.
  const StepResult run = run_step(*model, layout, params, batch, 1.0f);
  EXPECT_EQ(run.sums.loss_sum, sums->loss_sum);
}

TEST(TrainingModel, LaterTokensDoNotChangeEarlierLogits) {
  const ParameterLayout layout(tiny_config(true));
  const std::vector<float> params = initial_parameters(layout);
  Batch batch = random_batch(1, 80, layout.config().vocab_size, false);  // crosses attention blocks
  auto model = make_model(layout, 1, 80);
  ASSERT_TRUE(model);
  const size_t vocab = layout.config().vocab_size;
  std::vector<float> before(80 * vocab), after(80 * vocab);
  ASSERT_TRUE(model->logits(params, batch.inputs, 1, 80, before).ok());
  batch.inputs[70] = (batch.inputs[70] + 1) % int32_t(vocab);
  ASSERT_TRUE(model->logits(params, batch.inputs, 1, 80, after).ok());
  EXPECT_EQ(std::memcmp(before.data(), after.data(), 70 * vocab * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(before.data() + 70 * vocab, after.data() + 70 * vocab, vocab * sizeof(float)), 0);
}

TEST(TrainingModel, RowsShorterThanCreatedFor) {
  const ParameterLayout layout(tiny_config(true));
  const std::vector<float> params = initial_parameters(layout);
  const Batch batch = random_batch(2, 12, layout.config().vocab_size, true);
  auto longer = make_model(layout, 3, 32);
  auto exact = make_model(layout, 2, 12);
  ASSERT_TRUE(longer && exact);
  const StepResult a = run_step(*longer, layout, params, batch, 1.0f);
  const StepResult b = run_step(*exact, layout, params, batch, 1.0f);
  EXPECT_EQ(a.sums.loss_sum, b.sums.loss_sum);
  EXPECT_TRUE(bitwise_equal(a.grads, b.grads));
}

TEST(TrainingModel, InvalidInputIsAnError) {
  const ParameterLayout layout(tiny_config(true));
  const std::vector<float> params = initial_parameters(layout);
  const Batch good = random_batch(2, 8, layout.config().vocab_size, true);
  auto model = make_model(layout, 2, 8);
  ASSERT_TRUE(model);
  std::vector<float> grads(layout.total());
  auto fails = [&](const Batch& batch, const char* expected) {
    auto result = model->forward_backward(params, batch.view(), 1.0f, grads);
    EXPECT_FALSE(result.ok()) << expected;
    if (!result.ok()) {
      EXPECT_NE(result.message().find(expected), std::string::npos) << result.message();
    }
    EXPECT_FALSE(model->evaluate(params, batch.view()).ok()) << expected;
  };
  Batch bad = good;
  bad.inputs[3] = 48;
  fails(bad, "inputs[3] = 48 is not a token id");
  bad = good;
  bad.inputs[0] = -1;
  fails(bad, "inputs[0] = -1");
  bad = good;
  bad.targets[5] = 48;
  fails(bad, "targets[5] = 48");
  bad = good;
  bad.targets[5] = -2;
  fails(bad, "targets[5] = -2");
  bad = good;
  bad.targets.pop_back();
  fails(bad, "targets hold 15 ids");
  bad = good;
  bad.inputs.pop_back();
  fails(bad, "inputs hold 15 ids");
  bad = random_batch(3, 8, layout.config().vocab_size, false);
  fails(bad, "batch 3 is outside 1..2");
  bad = random_batch(1, 9, layout.config().vocab_size, false);
  fails(bad, "seq_len 9 is outside 1..8");

  std::vector<float> short_grads(layout.total() - 1);
  EXPECT_FALSE(model->forward_backward(params, good.view(), 1.0f, short_grads).ok());
  const std::vector<float> short_params(layout.total() - 1);
  EXPECT_FALSE(model->forward_backward(short_params, good.view(), 1.0f, grads).ok());
  std::vector<float> logits(good.inputs.size() * layout.config().vocab_size - 1);
  EXPECT_FALSE(model->logits(params, good.inputs, 2, 8, logits).ok());

  TrainingModelOptions none;
  none.max_batch = 0;
  EXPECT_FALSE(TrainingModel::create(layout, none).ok());
  ModelConfig broken = tiny_config(true);
  broken.num_kv_heads = 3;
  EXPECT_FALSE(TrainingModel::create(ParameterLayout(broken), TrainingModelOptions{}).ok());
  // The model still works after the refusals.
  EXPECT_TRUE(model->forward_backward(params, good.view(), 1.0f, grads).ok());
}

TEST(TrainingModel, NanParameterGivesNonFiniteLoss) {
  const ParameterLayout layout(tiny_config(true));
  std::vector<float> params = initial_parameters(layout);
  params[layout.layers()[1].gate_proj + 5] = std::numeric_limits<float>::quiet_NaN();
  const Batch batch = random_batch(2, 16, layout.config().vocab_size, true);
  auto model = make_model(layout, 2, 16);
  ASSERT_TRUE(model);
  const StepResult run = run_step(*model, layout, params, batch, 1.0f);
  EXPECT_FALSE(std::isfinite(run.sums.loss_sum));
  EXPECT_FALSE(std::isfinite(gradient_norm(run.grads)));
}

// BF16 operands (8 significant bits) with FP32 sums against the FP32 products: the loss and every
// gradient tensor within a relative L2 error that BF16 rounding of the operands explains.
TEST(TrainingModel, Bf16GradientsFollowTheFp32Path) {
  constexpr double kLossBound = 1e-3, kGradientBound = 2e-2;
  for (bool tied : {true, false}) {
    const ParameterLayout layout(tiny_config(tied));
    const std::vector<float> params = initial_parameters(layout);
    const Batch batch = random_batch(3, 20, layout.config().vocab_size, true);
    auto fp32 = make_model(layout, 3, 20);
    auto bf16 = make_model(layout, 3, 20, false, Precision::Bf16);
    ASSERT_TRUE(fp32 && bf16);
    const StepResult a = run_step(*fp32, layout, params, batch, 1.0f / 48);
    const StepResult b = run_step(*bf16, layout, params, batch, 1.0f / 48);
    EXPECT_EQ(a.sums.counted, b.sums.counted);
    EXPECT_NEAR(b.sums.loss_sum / a.sums.loss_sum, 1.0, kLossBound) << "tied " << tied;
    double worst = 0;
    for (const ParamTensor& t : layout.tensors()) {
      double error = 0, norm = 0;
      for (uint64_t i = t.offset; i < t.offset + t.count; ++i) {
        error += std::pow(double(b.grads[i]) - double(a.grads[i]), 2);
        norm += std::pow(double(a.grads[i]), 2);
      }
      const double relative = std::sqrt(error / norm);
      worst = std::max(worst, relative);
      EXPECT_LT(relative, kGradientBound) << t.name << " tied " << tied;
    }
    std::cout << "tied " << tied << ": loss ratio " << b.sums.loss_sum / a.sums.loss_sum
              << ", worst gradient relative L2 error " << worst << "\n";
  }
}

TEST(TrainingModel, Bf16RunsAreDeterministic) { expect_deterministic_runs(Precision::Bf16); }

}  // namespace
