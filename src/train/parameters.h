// The trainable parameters of one Qwen3 dense model as a single FP32 buffer with a fixed
// layout (Hugging Face tensor names and shapes). Gradients, AdamW moments and checkpoint
// averages use the same layout, so every pass over "all parameters" is one loop.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/model_config.h"

namespace kipp::train {

enum class ParamKind { Embedding, Projection, Norm, Head };

struct ParamTensor {
  std::string name;             // e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<uint64_t> shape;  // PyTorch order: [out, in] for projections
  uint64_t offset = 0;          // in floats, into the flat buffer
  uint64_t count = 0;
  ParamKind kind = ParamKind::Projection;
};

// A slice [offset, offset + count) of the flat buffer (in floats).
struct BufferSlice {
  uint64_t offset = 0;
  uint64_t count = 0;
};

// Offsets (in floats) of one decoder layer's tensors.
struct LayerOffsets {
  uint64_t attn_norm, q_proj, k_proj, v_proj, q_norm, k_norm, o_proj;
  uint64_t ffn_norm, gate_proj, up_proj, down_proj;
};

class ParameterLayout {
 public:
  explicit ParameterLayout(const ModelConfig& config);

  const ModelConfig& config() const { return config_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  uint64_t total() const { return total_; }
  const ParamTensor* find(std::string_view name) const;

  uint64_t embedding() const { return embedding_; }    // [vocab, hidden]
  uint64_t final_norm() const { return final_norm_; }  // [hidden]
  uint64_t head() const { return head_; }              // == embedding() when tied
  const std::vector<LayerOffsets>& layers() const { return layers_; }

 private:
  ModelConfig config_;
  std::vector<ParamTensor> tensors_;
  std::vector<LayerOffsets> layers_;
  uint64_t embedding_ = 0, final_norm_ = 0, head_ = 0, total_ = 0;
};

struct InitOptions {
  uint64_t seed = 0;
  double std = 0.02;
  // o_proj and down_proj drawn with std / sqrt(2 * layers) (GPT-2 style); off by default.
  bool scaled_residual = false;
};

// Norm gains 1, every other tensor N(0, std) from a counter-based generator keyed by (seed,
// tensor name), so a tensor's values do not depend on the other tensors or on thread count.
void init_parameters(const ParameterLayout& layout, const InitOptions& options, std::span<float> values);

// The dimensions of `got`, read from `source`, equal those of `want`, and so does embedding
// tying when `require_same_tying` (otherwise only an untied source into a tied `want` is refused:
// its lm_head would be lost). The error lists every difference. Constants (theta, eps, token
// ids) may differ.
Status check_model_dimensions(const ModelConfig& want, const ModelConfig& got, const std::string& source,
                              bool require_same_tying);

// Loads every tensor of an HF-layout checkpoint folder (BF16/F16/F32 safetensors) or a local
// or registry GGUF (quantized tensors are dequantized) into `values`. The
// source's config must equal the layout's; a tied source into an untied layout copies the
// embedding into lm_head.
Status load_parameters(const ParameterLayout& layout, const std::string& path, std::span<float> values);

// FP32 safetensors of `values` (HF names, layout order), written atomically.
Status save_parameters(const ParameterLayout& layout, std::span<const float> values, const std::string& path);

}  // namespace kipp::train
