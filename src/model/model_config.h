// The dimensions and constants of one Qwen3 dense model: a Hub checkpoint or one trained here.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace kipp {

struct ModelConfig {
  uint32_t hidden_size = 0;
  uint32_t num_layers = 0;
  uint32_t num_heads = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t ffn_size = 0;
  uint32_t vocab_size = 0;
  uint32_t context_length = 0;
  double rope_theta = 0;
  double rms_norm_eps = 0;
  bool tie_embeddings = false;
  uint32_t bos_token_id = 0;
  uint32_t eos_token_id = 0;

  // Attention width is q_heads * head_dim: NOT the hidden width in general (0.6B, 4B, 32B).
  uint64_t q_width() const { return uint64_t{num_heads} * head_dim; }
  uint64_t kv_width() const { return uint64_t{num_kv_heads} * head_dim; }
  // BF16 K and V for every layer.
  uint64_t kv_bytes_per_token() const { return uint64_t{num_layers} * 2 * kv_width() * 2; }
  uint64_t parameter_count() const;

  // Internal consistency: every dimension positive, heads a multiple of kv heads, even head_dim
  // (rotate-half RoPE), hidden and ffn widths multiples of 32 (quantization blocks), ids < vocab.
  Status validate() const;
};

bool operator==(const ModelConfig& a, const ModelConfig& b);

// Parses a Hugging Face Qwen3 config.json (model_type "qwen3", architectures
// ["Qwen3ForCausalLM"]); rejects anything that is not a plain Qwen3 dense model
// (rope scaling, sliding window, attention bias, another activation).
Expected<ModelConfig> parse_hf_config(const std::string& json_text);

}  // namespace kipp
