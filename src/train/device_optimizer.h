// The optimizer step kept on the training device: the parameters, the gradient (accumulated over
// a step's micro-batches) and the AdamW moments stay resident there, and the host copies are
// refreshed only when the trainer reads them (checkpoints, evaluation, samples). The trainer
// takes the same decisions as on its host path (clip factor, step guard, AdamW scalars); only
// the gradient's norm comes back per step.
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "train/adamw.h"
#include "train/training_model.h"

namespace kipp::train {

class DeviceOptimizer {
 public:
  virtual ~DeviceOptimizer() = default;

  // Copies the host's parameters and moments to the device, with the AdamW rule (decay ranges,
  // betas, eps, weight decay) the following steps apply.
  virtual Status load(std::span<const float> params, const AdamW& optimizer) = 0;
  // Copies the device's parameters and moments into the host's buffers.
  virtual Status store(std::span<float> params, AdamW& optimizer) = 0;

  // Sets the device gradient to zero (the start of every step).
  virtual Status clear_gradients() = 0;
  // TrainingModel::forward_backward over the resident parameters, adding into the device gradient.
  virtual Expected<LossSums> accumulate(const TokenBatch& batch, float grad_scale) = 0;
  // gradient_norm() of the device gradient: not finite when any element is not.
  virtual Expected<double> gradient_norm() = 0;
  // scale_gradients() of the device gradient.
  virtual Status scale_gradients(float factor) = 0;
  // AdamW::step on the device, bit for bit: update number `step_number` (1-based) at `lr`.
  virtual Status step(double lr, uint64_t step_number) = 0;
};

}  // namespace kipp::train
