// Hand-written forward and backward passes of the Qwen3 dense decoder for training, in FP32.
// Every matrix product goes through LinearProducts (OpenBLAS sgemm, or BF16 operands with FP32
// accumulation); element-wise passes are OpenMP loops.
// All activation and scratch buffers are allocated once in create() for the largest batch
// and reused by every step: nothing is allocated inside forward_backward().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "core/status.h"
#include "train/frozen_base.h"
#include "train/linear_products.h"
#include "train/lora.h"
#include "train/parameters.h"

namespace kipp::train {

class DeviceOptimizer;

// Target id that carries no loss (prompt tokens in SFT, padding).
inline constexpr int32_t kIgnoreTarget = -1;

// `batch` rows of `seq_len` tokens each, row-major; positions restart at 0 in every row and
// attention is causal within a row.
struct TokenBatch {
  std::span<const int32_t> inputs;   // batch * seq_len ids < vocab
  std::span<const int32_t> targets;  // batch * seq_len ids < vocab, or kIgnoreTarget
  uint32_t batch = 0;
  uint32_t seq_len = 0;
  // Keys the LoRA dropout masks (counter-based, so a resumed run draws the same ones); the
  // trainer derives it from the step and the micro-batch.
  uint64_t noise_key = 0;
};

struct LossSums {
  double loss_sum = 0;   // sum of cross-entropy (natural log) over counted targets
  uint64_t counted = 0;  // targets != kIgnoreTarget
};

// Told during forward_backward, as soon as a layer's backward is done, which slice
// [offset, offset + count) of the gradient buffer no later part of the pass writes (so its sum
// across processes can start while the backward pass goes on).
using GradientsReady = std::function<void(uint64_t offset, uint64_t count)>;

struct TrainingModelOptions {
  uint32_t max_batch = 1;
  uint32_t seq_len = 1;
  // Keep only each block's input and recompute the block during backward.
  bool recompute_blocks = false;
  // How the products multiply (`train.precision`).
  Precision precision = Precision::Fp32;
};

class TrainingModel {
 public:
  static Expected<std::unique_ptr<TrainingModel>> create(const ParameterLayout& layout,
                                                         const TrainingModelOptions& options);
  // A LoRA model over a frozen base: the `params` and `grads` of every call below are the
  // adapters (adapters.total() floats); the base is only read. `base` must outlive the model.
  static Expected<std::unique_ptr<TrainingModel>> create_lora(const FrozenBase& base, const AdapterLayout& adapters,
                                                              const TrainingModelOptions& options);
  virtual ~TrainingModel() = default;

  // Forward and backward over one micro-batch: returns the loss sums and ADDS
  // grad_scale * d(sum of cross-entropy)/d(parameter) into `grads` (so micro-batches accumulate;
  // the trainer passes 1 / counted targets of the whole step). Validates ids and shapes first.
  virtual Expected<LossSums> forward_backward(std::span<const float> params, const TokenBatch& batch, float grad_scale,
                                              std::span<float> grads) = 0;

  // The hook every following forward_backward calls (empty: none).
  virtual void set_gradients_ready(GradientsReady ready) = 0;

  // Forward only (validation): loss sums, no gradients.
  virtual Expected<LossSums> evaluate(std::span<const float> params, const TokenBatch& batch) = 0;

  // Forward only: logits [batch * seq_len, vocab] for every position (tests, export gate).
  virtual Status logits(std::span<const float> params, std::span<const int32_t> inputs, uint32_t batch,
                        uint32_t seq_len, std::span<float> out) = 0;

  // Bytes of activations and scratch held (for the memory report).
  virtual uint64_t workspace_bytes() const = 0;
  // The optimizer step on the model's device (device_optimizer.h), when it has one; the trainer
  // then keeps the parameters, gradients and moments there. Null: the host applies AdamW.
  virtual DeviceOptimizer* device_optimizer() { return nullptr; }
};

}  // namespace kipp::train
