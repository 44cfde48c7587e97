// Learning-rate schedules: linear warmup from 0, then cosine or linear decay to min_lr, or constant.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace kipp::train {

enum class ScheduleKind { Cosine, Linear, Constant };

Expected<ScheduleKind> parse_schedule_kind(std::string_view name);  // "cosine" | "linear" | "constant"

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::Cosine;
  double max_lr = 3e-4;
  double min_lr = 3e-5;
  uint64_t warmup_steps = 0;
  uint64_t total_steps = 1;
};

// Learning rate for update number `step` (0-based). Warmup: max_lr * (step + 1) / warmup_steps.
// After total_steps the rate stays at min_lr (constant: max_lr).
double learning_rate(const ScheduleOptions& options, uint64_t step);

}  // namespace kipp::train
