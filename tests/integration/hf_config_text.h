// An HF-style config.json of a ModelConfig, as the PyTorch references (tools/train_reference.py,
// tools/lora_reference.py) read it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/model_config.h"

namespace kipp::gates {

inline std::string hf_config_text(const ModelConfig& c) {
  nlohmann::json j = {{"hidden_size", c.hidden_size},
                      {"num_hidden_layers", c.num_layers},
                      {"num_attention_heads", c.num_heads},
                      {"num_key_value_heads", c.num_kv_heads},
                      {"head_dim", c.head_dim},
                      {"intermediate_size", c.ffn_size},
                      {"vocab_size", c.vocab_size},
                      {"rope_theta", c.rope_theta},
                      {"rms_norm_eps", c.rms_norm_eps},
                      {"tie_word_embeddings", c.tie_embeddings}};
  return j.dump(2);
}

}  // namespace kipp::gates
