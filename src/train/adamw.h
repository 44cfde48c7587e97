// AdamW with decoupled weight decay over the flat parameter buffer in one fused pass.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "train/parameters.h"

namespace kipp::train {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  bool decay_embeddings = true;  // norms are never decayed (Qwen3 has no biases)
};

class AdamW {
 public:
  // Over the tensors of one flat buffer (a ParameterLayout's, or an AdapterLayout's).
  AdamW(std::span<const ParamTensor> tensors, const AdamWOptions& options);

  // One update at learning rate `lr` with bias correction for step `step_index + 1`, where
  // step_index counts the updates applied so far (so resume passes the saved count).
  void step(std::span<float> params, std::span<const float> grads, double lr);

  uint64_t steps_taken() const { return steps_; }
  void set_steps_taken(uint64_t steps) { steps_ = steps; }
  std::span<float> first_moment() { return m_; }
  std::span<float> second_moment() { return v_; }
  std::span<const float> first_moment() const { return m_; }
  std::span<const float> second_moment() const { return v_; }
  const AdamWOptions& options() const { return options_; }

  struct DecayRange {
    uint64_t offset, count;
    bool decays;
  };
  // One per tensor: whether weight decay applies to it (the GPU optimizer applies the same rule).
  std::span<const DecayRange> decay_ranges() const { return ranges_; }

 private:
  AdamWOptions options_;
  std::vector<float> m_, v_;
  std::vector<DecayRange> ranges_;
  uint64_t steps_ = 0;
};

// Global L2 norm of the gradient (double accumulation); not finite when any element is not.
double gradient_norm(std::span<const float> grads);
// Multiplies every gradient by `factor`.
void scale_gradients(std::span<float> grads, float factor);
// What clip_gradient_norm multiplies the gradients by at `norm`: max_norm / (norm + 1e-6) when
// max_norm > 0 and the norm is finite and exceeds it, else 1 (no scaling).
double clip_factor(double norm, double max_norm);
// PyTorch's clip_grad_norm_: returns the norm before clipping and, when max_norm > 0 and the
// norm exceeds it, scales the gradients by max_norm / (norm + 1e-6).
double clip_gradient_norm(std::span<float> grads, double max_norm);

}  // namespace kipp::train
