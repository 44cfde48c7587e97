// The GPU update's decay runs: adjacent tensors of one rule merge, a change of rule or a gap
// starts a new run, and the runs cover exactly the elements the tensors cover.
#include <gtest/gtest.h>

#include <vector>

#include "train/cuda/decay_runs.h"

namespace kipp::train::cuda {
namespace {

TEST(DecayRuns, MergeNeighboursOfOneRule) {
  const std::vector<AdamW::DecayRange> ranges = {{0, 10, true},  {10, 4, true}, {14, 2, false}, {16, 0, true},
                                                 {16, 3, false}, {19, 5, true}, {30, 1, true}};
  const auto runs = decay_runs(ranges);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].offset, 0u);
  EXPECT_EQ(runs[0].count, 14u);
  EXPECT_EQ(runs[0].decays, 1u);
  EXPECT_EQ(runs[1].offset, 14u);
  EXPECT_EQ(runs[1].count, 5u);
  EXPECT_EQ(runs[1].decays, 0u);
  EXPECT_EQ(runs[2].offset, 19u);
  EXPECT_EQ(runs[2].count, 5u);
  // A gap (24..30) is never covered.
  EXPECT_EQ(runs[3].offset, 30u);
  EXPECT_EQ(runs[3].count, 1u);
}

TEST(DecayRuns, FollowAnOptimizersTensors) {
  const std::vector<ParamTensor> tensors = {
      {.name = "e", .shape = {8}, .offset = 0, .count = 8, .kind = ParamKind::Embedding},
      {.name = "n", .shape = {2}, .offset = 8, .count = 2, .kind = ParamKind::Norm},
      {.name = "q", .shape = {6}, .offset = 10, .count = 6, .kind = ParamKind::Projection},
      {.name = "k", .shape = {6}, .offset = 16, .count = 6, .kind = ParamKind::Projection}};
  AdamWOptions options;
  options.decay_embeddings = false;
  const AdamW optimizer(tensors, options);
  const auto runs = decay_runs(optimizer.decay_ranges());
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].count, 10u);
  EXPECT_EQ(runs[0].decays, 0u);
  EXPECT_EQ(runs[1].offset, 10u);
  EXPECT_EQ(runs[1].count, 12u);
  EXPECT_EQ(runs[1].decays, 1u);
}

}  // namespace
}  // namespace kipp::train::cuda
