// The dimensions and constants of one Qwen3 dense model: a Hub checkpoint or one trained here.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "core/status.h"
#include "format/quant.h"
#include "model/gguf_keys.h"

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

  // Internal consistency: every field within its ModelConfigField rule, heads a multiple of kv
  // heads, the attention width a multiple of the quantization block, ids < vocab.
  Status validate() const;

  bool operator==(const ModelConfig&) const = default;
};

// Where a GGUF file holds a field.
enum class GgufHome {
  HyperParameter,  // a qwen3.* key written by add_model_metadata
  TokenizerKey,    // a tokenizer.ggml.* key written with the vocabulary
  TensorAbsence,   // true exactly when the file has no tensor of that name
};

inline constexpr std::string_view kQuantBlockWhy =
    "GGUF quantizes each matrix row in blocks of 32 weights, so every width the rows have must be a whole "
    "number of blocks";
inline constexpr std::string_view kRotaryPairsWhy = "rotary position embeddings rotate pairs of dimensions";

// What parsing, writing, comparing and checking need to know of one ModelConfig field.
struct ModelConfigField {
  std::string_view hf_key;  // in a Hugging Face config.json and the registry; names the field in messages
  GgufHome gguf_home;
  std::string_view gguf_key;        // the key, or for TensorAbsence the tensor's name
  std::string_view gguf_twin = {};  // a second hyper-parameter key that repeats the value
  int gguf_order = -1;              // position among the hyper-parameter keys, as llama.cpp writes them
  const char* yaml_key = nullptr;   // in a training config (train/train_config.h); null: not set there
  // Counts (uint32 fields that are not token ids) are positive multiples of `multiple`.
  uint32_t multiple = 1;
  std::string_view multiple_why = {};
  bool token_id = false;          // below vocab_size rather than a positive count
  bool shapes_tensors = false;    // a tensor dimension: another value means other weight shapes
  bool yaml_auto = false;         // a training config may leave it to be resolved (`auto`)
  bool hf_first_of_list = false;  // config.json may hold a list whose first entry is the value
  // Real fields lie in (0, at_most].
  double at_most = std::numeric_limits<double>::infinity();

  // For messages: the GGUF key, or for TensorAbsence "presence of <tensor>".
  std::string gguf_source() const {
    return gguf_home == GgufHome::TensorAbsence ? "presence of " + std::string(gguf_key) : std::string(gguf_key);
  }
};

// The one list of ModelConfig's fields, in declaration order: calls v(field, &ModelConfig::member)
// for each, so a caller can reach the member in several configs at once.
template <class Visitor>
void visit_config_members(Visitor&& v) {
  using enum GgufHome;
  namespace key = gguf_key;
  v(ModelConfigField{.hf_key = "hidden_size",
                     .gguf_home = HyperParameter,
                     .gguf_key = key::kEmbeddingLength,
                     .gguf_order = 2,
                     .yaml_key = "model.d_model",
                     .multiple = kQuantBlock,
                     .multiple_why = kQuantBlockWhy,
                     .shapes_tensors = true},
    &ModelConfig::hidden_size);
  v(ModelConfigField{.hf_key = "num_hidden_layers",
                     .gguf_home = HyperParameter,
                     .gguf_key = key::kBlockCount,
                     .gguf_order = 0,
                     .yaml_key = "model.n_layers",
                     .shapes_tensors = true},
    &ModelConfig::num_layers);
  v(ModelConfigField{.hf_key = "num_attention_heads",
                     .gguf_home = HyperParameter,
                     .gguf_key = key::kHeadCount,
                     .gguf_order = 4,
                     .yaml_key = "model.n_heads",
                     .shapes_tensors = true},
    &ModelConfig::num_heads);
  v(ModelConfigField{.hf_key = "num_key_value_heads",
                     .gguf_home = HyperParameter,
                     .gguf_key = key::kHeadCountKv,
                     .gguf_order = 5,
                     .yaml_key = "model.n_kv_heads",
                     .shapes_tensors = true},
    &ModelConfig::num_kv_heads);
  // GGUF has a key and a value length; Qwen3 uses one head width for both.
  v(ModelConfigField{.hf_key = "head_dim",
                     .gguf_home = HyperParameter,
                     .gguf_key = key::kKeyLength,
                     .gguf_twin = key::kValueLength,
                     .gguf_order = 8,
                     .yaml_key = "model.head_dim",
                     .multiple = 2,
                     .multiple_why = kRotaryPairsWhy,
                     .shapes_tensors = true,
                     .yaml_auto = true},
    &ModelConfig::head_dim);
  v(ModelConfigField{.hf_key = "intermediate_size",
                     .gguf_home = HyperParameter,
                     .gguf_key = key::kFeedForwardLength,
                     .gguf_order = 3,
                     .yaml_key = "model.d_ff",
                     .multiple = kQuantBlock,
                     .multiple_why = kQuantBlockWhy,
                     .shapes_tensors = true},
    &ModelConfig::ffn_size);
  v(ModelConfigField{.hf_key = "vocab_size",
                     .gguf_home = HyperParameter,
                     .gguf_key = key::kVocabSize,
                     .gguf_order = 9,
                     .yaml_key = "model.vocab_size",
                     .shapes_tensors = true,
                     .yaml_auto = true},
    &ModelConfig::vocab_size);
  v(ModelConfigField{.hf_key = "max_position_embeddings",
                     .gguf_home = HyperParameter,
                     .gguf_key = key::kContextLength,
                     .gguf_order = 1,
                     .yaml_key = "model.max_seq_len"},
    &ModelConfig::context_length);
  v(ModelConfigField{.hf_key = "rope_theta",
                     .gguf_home = HyperParameter,
                     .gguf_key = key::kRopeFreqBase,
                     .gguf_order = 6,
                     .yaml_key = "model.rope_theta"},
    &ModelConfig::rope_theta);
  v(ModelConfigField{.hf_key = "rms_norm_eps",
                     .gguf_home = HyperParameter,
                     .gguf_key = key::kRmsEpsilon,
                     .gguf_order = 7,
                     .yaml_key = "model.norm_eps",
                     .at_most = 1},
    &ModelConfig::rms_norm_eps);
  // A tied model's lm_head is its embedding, so the file has no output tensor.
  v(ModelConfigField{.hf_key = "tie_word_embeddings",
                     .gguf_home = TensorAbsence,
                     .gguf_key = "output.weight",
                     .yaml_key = "model.weight_tying"},
    &ModelConfig::tie_embeddings);
  // The ids come from the tokenizer, not from a training config's model section.
  v(
      ModelConfigField{
          .hf_key = "bos_token_id", .gguf_home = TokenizerKey, .gguf_key = key::kBosTokenId, .token_id = true},
      &ModelConfig::bos_token_id);
  v(ModelConfigField{.hf_key = "eos_token_id",
                     .gguf_home = TokenizerKey,
                     .gguf_key = key::kEosTokenId,
                     .token_id = true,
                     .hf_first_of_list = true},
    &ModelConfig::eos_token_id);
}

// Calls v(field, c.member) for each field; for a const and a mutable config alike.
template <class Config, class Visitor>
void visit_config_fields(Config& c, Visitor&& v) {
  visit_config_members([&](const ModelConfigField& field, auto member) { v(field, c.*member); });
}

// Parses a Hugging Face Qwen3 config.json (model_type "qwen3", architectures
// ["Qwen3ForCausalLM"]); rejects anything that is not a plain Qwen3 dense model
// (rope scaling, sliding window, attention bias, another activation).
Expected<ModelConfig> parse_hf_config(const std::string& json_text);

}  // namespace kipp
