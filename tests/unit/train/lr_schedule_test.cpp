// Learning-rate schedules against their defining formulas at the points that pin them down:
// the warmup ramp, the start and end of the decay, its midpoint, and after the last step.
#include <gtest/gtest.h>

#include <cmath>

#include "train/lr_schedule.h"

namespace kipp::train {
namespace {

ScheduleOptions options(ScheduleKind kind) {
  ScheduleOptions o;
  o.kind = kind;
  o.max_lr = 1e-3;
  o.min_lr = 1e-4;
  o.warmup_steps = 10;
  o.total_steps = 110;
  return o;
}

TEST(LrSchedule, WarmupIsLinearFromTheFirstStep) {
  for (ScheduleKind kind : {ScheduleKind::Cosine, ScheduleKind::Linear, ScheduleKind::Constant}) {
    const ScheduleOptions o = options(kind);
    EXPECT_DOUBLE_EQ(learning_rate(o, 0), 1e-4);  // max_lr * 1 / 10: step 0 already learns
    EXPECT_DOUBLE_EQ(learning_rate(o, 4), 5e-4);
    EXPECT_DOUBLE_EQ(learning_rate(o, 9), 1e-3);
  }
}

TEST(LrSchedule, DecayShapes) {
  const ScheduleOptions cosine = options(ScheduleKind::Cosine);
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 10), 1e-3);
  EXPECT_NEAR(learning_rate(cosine, 60), 5.5e-4, 1e-15);  // halfway: the mean of max and min
  EXPECT_NEAR(learning_rate(cosine, 35), 1e-4 + 9e-4 * 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-15);
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 110), 1e-4);
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 500), 1e-4);

  const ScheduleOptions linear = options(ScheduleKind::Linear);
  EXPECT_DOUBLE_EQ(learning_rate(linear, 10), 1e-3);
  EXPECT_NEAR(learning_rate(linear, 35), 1e-4 + 9e-4 * 0.75, 1e-15);
  EXPECT_NEAR(learning_rate(linear, 109), 1e-4 + 9e-4 * 0.01, 1e-15);
  EXPECT_DOUBLE_EQ(learning_rate(linear, 200), 1e-4);

  const ScheduleOptions constant = options(ScheduleKind::Constant);
  EXPECT_DOUBLE_EQ(learning_rate(constant, 10), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(constant, 1000), 1e-3);
}

TEST(LrSchedule, NoWarmupAndNames) {
  ScheduleOptions o = options(ScheduleKind::Cosine);
  o.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(learning_rate(o, 0), 1e-3);
  EXPECT_EQ(*parse_schedule_kind("linear"), ScheduleKind::Linear);
  auto bad = parse_schedule_kind("cosin");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("unknown schedule 'cosin'"), std::string::npos);
}

}  // namespace
}  // namespace kipp::train
