// The frozen base model of a LoRA fine-tune, held as the inference engine holds weights: BF16
// (from an HF folder, or a BF16 GGUF) or quantized (Q8_0 / affine4 from a GGUF: QLoRA), with the
// projections multiplied through the CPU kernel table. Nothing of it gets a gradient, so no FP32
// copy of the model exists: the memory of a LoRA run is the base as stored plus adapters and
// activations.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/cpu/kernels.h"
#include "kernels/weights.h"
#include "model/model_config.h"

namespace kipp::train {

// One decoder layer of the base: the seven projections in LoraTarget order (q, k, v, o, gate,
// up, down), each as the kernel table reads it, and the norm gains as FP32.
struct FrozenLayer {
  std::array<kernels::WeightMatrix, 7> projections;
  std::vector<float> attn_norm, q_norm, k_norm, ffn_norm;
};

struct FrozenWeights {
  const kernels::KernelTable* kernels = nullptr;  // what multiplies and dequantizes every matrix
  kernels::WeightMatrix embedding;                // rows looked up with kernels->dequantize_row
  kernels::WeightMatrix head;                     // the embedding itself when tied
  std::vector<float> final_norm;
  std::vector<FrozenLayer> layers;
};

class FrozenBase {
 public:
  // `source`: an HF checkpoint folder (BF16/F16/F32 safetensors, kept as BF16) or a GGUF (its
  // tensors kept in their stored types). Its config must have `config`'s dimensions.
  static Expected<std::unique_ptr<FrozenBase>> open(const ModelConfig& config, const std::string& source);
  virtual ~FrozenBase() = default;

  virtual const ModelConfig& config() const = 0;
  // "bf16", "q8_0", "affine4" or "mixed": what the projections are stored as (for the run's report).
  virtual std::string storage() const = 0;
  // Bytes the base holds in memory (packed weights, norms, embedding).
  virtual uint64_t bytes() const = 0;
  // The matrices and gains, for the training model's products.
  virtual const FrozenWeights& weights() const = 0;
};

}  // namespace kipp::train
