// How the training model reaches its weights: the products by a layer's projections, the norm
// gains, the embedding and the output head, and where their gradients go. The full model's
// weights are the FP32 parameters multiplied through LinearProducts; a LoRA model's are a frozen
// base multiplied through the inference kernels plus FP32 adapters, the only tensors with
// gradients. One forward and backward pass (training_model.cpp) serves both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/status.h"
#include "train/frozen_base.h"
#include "train/linear_products.h"
#include "train/lora.h"
#include "train/parameters.h"

namespace kipp::train {

// A layer's products as the model runs them: q/k/v and gate/up fused (their outputs side by
// side, [rows, q_width + 2 kv_width] and [rows, 2 ffn]).
enum class Block : uint8_t { Qkv, O, GateUp, Down };
enum class Gain : uint8_t { Attn, Q, K, Ffn };

// The buffers of one pass: the trainable parameters, their gradients (null: no backward), and
// whether it trains (LoRA dropout) with which noise key.
struct WeightPass {
  const float* params = nullptr;
  float* grads = nullptr;
  bool training = false;
  uint64_t noise_key = 0;
};

class ModelWeights {
 public:
  virtual ~ModelWeights() = default;

  // Floats of the parameter (and gradient) buffer.
  virtual uint64_t parameter_count() const = 0;
  // Binds the buffers every call below uses, until the next begin().
  virtual void begin(const WeightPass& pass) = 0;

  virtual const float* gain(size_t layer, Gain which) const = 0;
  virtual const float* final_gain() const = 0;
  // Where a gain's gradient accumulates (a scratch sink when the gains are frozen).
  virtual float* gain_grad(size_t layer, Gain which) = 0;
  virtual float* final_gain_grad() = 0;

  // out[row] = embedding[ids[row]]; and its gradient from dx.
  virtual void embed(const int32_t* ids, size_t rows, float* out) = 0;
  virtual void embed_backward(const float* dx, const int32_t* ids, size_t rows) = 0;

  // y = x W^T, or y += x W^T with `accumulate`; x [rows, in], y [rows, out].
  virtual void forward(size_t layer, Block block, const float* x, size_t rows, bool accumulate, float* y) = 0;
  // dx = dy W [rows, in] (written).
  virtual void backward_input(size_t layer, Block block, const float* dy, size_t rows, float* dx) = 0;
  // The weights' gradients from dy and the forward's input x.
  virtual void backward_weights(size_t layer, Block block, const float* dy, const float* x, size_t rows) = 0;

  // logits [rows, vocab] = x E^T; and dx = dlogits E (written) with the head's gradient.
  virtual void head_forward(const float* x, size_t rows, float* logits) = 0;
  virtual void head_backward(const float* dlogits, const float* x, size_t rows, float* dx) = 0;

  // The gradients only `layer`'s backward writes (count 0 when the layer trains nothing).
  virtual BufferSlice layer_gradients(size_t layer) const = 0;

  // Bytes of scratch held (the memory report).
  virtual uint64_t workspace_bytes() const = 0;
};

std::unique_ptr<ModelWeights> make_full_weights(const ParameterLayout& layout,
                                                std::unique_ptr<LinearProducts> products);
// `max_rows`: the most rows any call multiplies; `products` multiply the base's dx.
Expected<std::unique_ptr<ModelWeights>> make_lora_weights(const FrozenBase& base, const AdapterLayout& adapters,
                                                          std::unique_ptr<LinearProducts> products, size_t max_rows);

}  // namespace kipp::train
