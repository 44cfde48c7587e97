// The per-element arithmetic the GPU training kernels run (kernels/cuda/train_math.h), run here
// on the CPU against the CPU trainer: the AdamW update bit for bit against train/adamw.cpp, the
// SwiGLU and RMSNorm element formulas against train/fused_ops.cpp (whose vectorized builds may
// fuse multiply-adds, hence a few ulps), and the embedding gradient's summing plan by its
// invariants.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cuda/train_embedding_plan.h"
#include "kernels/cuda/train_math.h"
#include "train/adamw.h"
#include "train/fused_ops.h"
#include "unit/helpers/random_values.h"

namespace kipp::cuda::train {
namespace {

using kipp::test_support::normal_values;
using kipp::train::AdamW;
using kipp::train::AdamWOptions;
using kipp::train::ParamKind;
using kipp::train::ParamTensor;

bool same_bits(const std::vector<float>& a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// |a - b| within `ulps` units in the last place of the larger.
void expect_close(float a, float b, float ulps, const char* what, size_t i) {
  const float scale = std::max(std::fabs(a), std::fabs(b));
  const float tolerance = ulps * std::numeric_limits<float>::epsilon() * std::max(scale, 1e-30f);
  EXPECT_LE(std::fabs(a - b), tolerance) << what << "[" << i << "]: " << a << " vs " << b;
}

TEST(TrainMath, AdamWElementIsBitwiseTheCpuOptimizer) {
  // Every kind of tensor, so both the decayed and the undecayed factor are exercised.
  const std::vector<ParamTensor> tensors = {
      {.name = "embed", .shape = {257}, .offset = 0, .count = 257, .kind = ParamKind::Embedding},
      {.name = "norm", .shape = {64}, .offset = 257, .count = 64, .kind = ParamKind::Norm},
      {.name = "proj", .shape = {1000}, .offset = 321, .count = 1000, .kind = ParamKind::Projection},
      {.name = "head", .shape = {300}, .offset = 1321, .count = 300, .kind = ParamKind::Head}};
  const size_t total = 1621;
  for (const bool decay_embeddings : {true, false}) {
    AdamWOptions options;
    options.beta1 = 0.85;
    options.beta2 = 0.97;
    options.eps = 1e-7;
    options.weight_decay = 0.05;
    options.decay_embeddings = decay_embeddings;
    AdamW cpu(tensors, options);
    std::vector<float> cpu_params = normal_values(total, 1, 0.05f);
    std::vector<float> params = cpu_params, m(total, 0.0f), v(total, 0.0f);
    const double lrs[] = {3e-4, 1e-3, 7.7e-5, 2e-2};
    for (uint64_t step = 1; step <= 4; ++step) {
      std::vector<float> grads = normal_values(total, uint32_t(10 + step), step == 3 ? 10.0f : 0.01f);
      grads[5] = 0.0f;  // a zero gradient: v stays tiny, eps matters
      const double lr = lrs[step - 1];
      cpu.step(cpu_params, grads, lr);
      const AdamWScalars s = adamw_scalars(options.beta1, options.beta2, options.eps, options.weight_decay, lr, step);
      for (const AdamW::DecayRange& range : cpu.decay_ranges()) {
        const float keep = range.decays ? s.keep_decayed : 1.0f;
        for (uint64_t i = range.offset; i < range.offset + range.count; ++i)
          adamw_element(params[i], m[i], v[i], grads[i], keep, s);
      }
      ASSERT_TRUE(same_bits(params, cpu_params)) << "step " << step;
      ASSERT_TRUE(same_bits(m, cpu.first_moment())) << "step " << step;
      ASSERT_TRUE(same_bits(v, cpu.second_moment())) << "step " << step;
    }
  }
}

TEST(TrainMath, DecayRangesFollowTheTensorKinds) {
  const std::vector<ParamTensor> tensors = {
      {.name = "e", .shape = {4}, .offset = 0, .count = 4, .kind = ParamKind::Embedding},
      {.name = "n", .shape = {2}, .offset = 4, .count = 2, .kind = ParamKind::Norm},
      {.name = "p", .shape = {3}, .offset = 6, .count = 3, .kind = ParamKind::Projection}};
  AdamWOptions options;
  options.decay_embeddings = false;
  const AdamW optimizer(tensors, options);
  const auto ranges = optimizer.decay_ranges();
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_FALSE(ranges[0].decays);
  EXPECT_FALSE(ranges[1].decays);
  EXPECT_TRUE(ranges[2].decays);
  EXPECT_EQ(ranges[2].offset, 6u);
  EXPECT_EQ(ranges[2].count, 3u);
}

TEST(TrainMath, FastExpFollowsExpAndItsClamps) {
  for (float x = -87.0f; x <= 88.0f; x += 0.37f) expect_close(fast_exp(x), std::exp(x), 4, "exp", 0);
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);
  EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
}

TEST(TrainMath, SwiGluElementsMatchTheCpuPasses) {
  const size_t rows = 7, width = 96;
  const std::vector<float> gate_up = normal_values(rows * 2 * width, 3, 3.0f);
  std::vector<float> act(rows * width);
  kipp::train::ops::swiglu_forward(gate_up.data(), rows, width, act.data());
  std::vector<float> dact = normal_values(rows * width, 4, 1.0f);
  std::vector<float> cpu_grad = gate_up, cpu_act = dact;
  kipp::train::ops::swiglu_backward(cpu_grad.data(), cpu_act.data(), rows, width);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < width; ++i) {
      const float gate = gate_up[r * 2 * width + i], up = gate_up[r * 2 * width + width + i];
      const size_t e = r * width + i;
      expect_close(swiglu_element(gate, up), act[e], 8, "act", e);
      float dgate, dup, recomputed;
      swiglu_backward_element(gate, up, dact[e], dgate, dup, recomputed);
      // 1 + gate * (1 - sigmoid) cancels for negative gates: the bound is relative to its terms.
      const float sigmoid = 1.0f / (1.0f + std::exp(-gate));
      const float terms = std::fabs(dact[e] * up * sigmoid) * (1.0f + std::fabs(gate));
      EXPECT_LE(std::fabs(dgate - cpu_grad[r * 2 * width + i]), 8 * std::numeric_limits<float>::epsilon() * terms)
          << "dgate[" << e << "]";
      expect_close(dup, cpu_grad[r * 2 * width + width + i], 8, "dup", e);
      expect_close(recomputed, cpu_act[e], 8, "recomputed act", e);
    }
  }
}

TEST(TrainMath, RmsNormElementsMatchTheCpuPasses) {
  const size_t rows = 5, width = 160;
  const float eps = 1e-6f;
  const std::vector<float> x = normal_values(rows * width, 5, 2.0f);
  const std::vector<float> gain = normal_values(width, 6, 1.0f);
  const std::vector<float> dy = normal_values(rows * width, 7, 1.0f);
  std::vector<float> rstd(rows), y(rows * width);
  kipp::train::ops::rmsnorm_forward(x.data(), gain.data(), rows, width, eps, rstd.data(), y.data());
  std::vector<float> partials(kipp::train::ops::reduction_partials(rows, width));
  std::vector<float> dx(rows * width, 0.5f), dgain(width, 0.0f);
  kipp::train::ops::rmsnorm_backward(dy.data(), x.data(), rstd.data(), gain.data(), rows, width, partials.data(),
                                     dx.data(), dgain.data());
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * width;
    const float* dyr = dy.data() + r * width;
    float squares = 0, dot = 0;
    for (size_t i = 0; i < width; ++i) squares = add(squares, mul(xr[i], xr[i]));
    const float s = inverse_rms(squares, uint32_t(width), eps);
    expect_close(s, rstd[r], 16, "rstd", r);
    for (size_t i = 0; i < width; ++i) dot = add(dot, mul(mul(dyr[i], gain[i]), mul(xr[i], s)));
    const float mean = mul(dot, 1.0f / float(width));
    for (size_t i = 0; i < width; ++i) {
      // A difference in the mean (sums in another order) moves dx by at most |n * d(mean)|.
      const float want = dx[r * width + i] - 0.5f;
      const float got = rmsnorm_dx(dyr[i], xr[i], gain[i], s, mean);
      EXPECT_NEAR(got, want, 1e-5f * (1.0f + std::fabs(want))) << "dx[" << r << ", " << i << "]";
    }
  }
}

TEST(TrainMath, EmbeddingPlanGroupsRowsByIdInRowOrder) {
  const std::vector<int32_t> ids = {5, 2, 5, 9, 2, 5, 0};
  auto plan = plan_embedding_grad(ids, 10);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->ids, (std::vector<int32_t>{0, 2, 5, 9}));
  EXPECT_EQ(plan->starts, (std::vector<uint32_t>{0, 1, 3, 6, 7}));
  EXPECT_EQ(plan->rows, (std::vector<uint32_t>{6, 1, 4, 0, 2, 5, 3}));

  // Summing by the plan is the CPU's dtable[ids[row]] += dx[row] in row order, bit for bit.
  const size_t width = 33;
  const std::vector<float> dx = normal_values(ids.size() * width, 8, 1.0f);
  std::vector<float> cpu(10 * width, 0.25f), planned = cpu;
  kipp::train::ops::embedding_backward(dx.data(), ids.data(), ids.size(), width, cpu.data());
  for (size_t k = 0; k < plan->ids.size(); ++k) {
    for (uint32_t j = plan->starts[k]; j < plan->starts[k + 1]; ++j) {
      for (size_t c = 0; c < width; ++c) planned[size_t(plan->ids[k]) * width + c] += dx[plan->rows[j] * width + c];
    }
  }
  EXPECT_EQ(std::memcmp(cpu.data(), planned.data(), cpu.size() * sizeof(float)), 0);
}

TEST(TrainMath, EmbeddingPlanRefusesIdsOutsideTheVocabulary) {
  const std::vector<int32_t> ids = {1, 10};
  auto plan = plan_embedding_grad(ids, 10);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.message(), "token id 10 at row 1 is outside the vocabulary of 10");
  const std::vector<int32_t> negative = {-1};
  EXPECT_FALSE(plan_embedding_grad(negative, 10).ok());
  auto empty = plan_embedding_grad({}, 10);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->starts, (std::vector<uint32_t>{0}));
}

}  // namespace
}  // namespace kipp::cuda::train
