#include "train/lr_schedule.h"

#include <cmath>
#include <string>

namespace kipp::train {

Expected<ScheduleKind> parse_schedule_kind(std::string_view name) {
  if (name == "cosine") return ScheduleKind::Cosine;
  if (name == "linear") return ScheduleKind::Linear;
  if (name == "constant") return ScheduleKind::Constant;
  return make_error("unknown schedule '" + std::string(name) + "' (expected cosine, linear or constant)");
}

double learning_rate(const ScheduleOptions& options, uint64_t step) {
  if (step < options.warmup_steps) return options.max_lr * double(step + 1) / double(options.warmup_steps);
  if (options.kind == ScheduleKind::Constant) return options.max_lr;
  if (step >= options.total_steps) return options.min_lr;
  const uint64_t decay_steps = options.total_steps - options.warmup_steps;
  const double progress = decay_steps == 0 ? 1.0 : double(step - options.warmup_steps) / double(decay_steps);
  const double shape = options.kind == ScheduleKind::Cosine ? 0.5 * (1.0 + std::cos(M_PI * progress)) : 1.0 - progress;
  return options.min_lr + (options.max_lr - options.min_lr) * shape;
}

}  // namespace kipp::train
