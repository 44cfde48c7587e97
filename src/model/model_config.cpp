#include "model/model_config.h"

#include <nlohmann/json.hpp>

namespace kipp {
namespace {

using nlohmann::json;

Expected<uint32_t> read_u32(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return make_error(std::string("config.json: missing key '") + key + "'");
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 0xffffffffLL) {
    return make_error(std::string("config.json: '") + key + "' must be a non-negative integer, found " + it->dump());
  }
  return static_cast<uint32_t>(it->get<int64_t>());
}

Expected<double> read_number(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return make_error(std::string("config.json: missing key '") + key + "'");
  if (!it->is_number()) return make_error(std::string("config.json: '") + key + "' must be a number, found " + it->dump());
  return it->get<double>();
}

// Keys whose presence with a non-default value means a model Kipp does not run.
Status require_plain_qwen3(const json& config) {
  const auto model_type = config.value("model_type", std::string());
  if (model_type != "qwen3") {
    return make_error("config.json: model_type is '" + model_type + "' (expected 'qwen3')");
  }
  if (config.contains("architectures") && config["architectures"] != json::array({"Qwen3ForCausalLM"})) {
    return make_error("config.json: architectures is " + config["architectures"].dump() +
                      " (expected [\"Qwen3ForCausalLM\"])");
  }
  if (config.contains("rope_scaling") && !config["rope_scaling"].is_null()) {
    return make_error("config.json: rope_scaling is " + config["rope_scaling"].dump() + " (expected null)");
  }
  if (config.value("use_sliding_window", false)) {
    return make_error("config.json: use_sliding_window is true (expected false)");
  }
  if (config.value("attention_bias", false)) {
    return make_error("config.json: attention_bias is true (expected false)");
  }
  const auto activation = config.value("hidden_act", std::string("silu"));
  if (activation != "silu") return make_error("config.json: hidden_act is '" + activation + "' (expected 'silu')");
  return ok_status();
}

}  // namespace

uint64_t ModelConfig::parameter_count() const {
  const uint64_t hidden = hidden_size;
  const uint64_t per_layer = hidden * q_width() + 2 * hidden * kv_width() + q_width() * hidden +
                             3 * hidden * ffn_size + 2 * hidden + 2 * uint64_t{head_dim};
  const uint64_t embedding = uint64_t{vocab_size} * hidden;
  return embedding * (tie_embeddings ? 1 : 2) + per_layer * num_layers + hidden;
}

Status ModelConfig::validate() const {
  const std::pair<const char*, uint32_t> positive[] = {
      {"hidden_size", hidden_size}, {"num_hidden_layers", num_layers}, {"num_attention_heads", num_heads},
      {"num_key_value_heads", num_kv_heads}, {"head_dim", head_dim}, {"intermediate_size", ffn_size},
      {"vocab_size", vocab_size}, {"max_position_embeddings", context_length}};
  for (const auto& [name, value] : positive) {
    if (value == 0) return make_error(std::string("model config: ") + name + " is 0 (expected > 0)");
  }
  if (num_heads % num_kv_heads != 0) {
    return make_error("model config: num_attention_heads " + std::to_string(num_heads) +
                      " is not a multiple of num_key_value_heads " + std::to_string(num_kv_heads));
  }
  if (head_dim % 2 != 0) return make_error("model config: head_dim " + std::to_string(head_dim) + " is odd (RoPE needs pairs)");
  for (const auto& [name, value] : {std::pair{"hidden_size", hidden_size}, std::pair{"intermediate_size", ffn_size},
                                    std::pair{"attention width", static_cast<uint32_t>(q_width())}}) {
    if (value % 32 != 0) {
      return make_error(std::string("model config: ") + name + " " + std::to_string(value) +
                        " is not a multiple of 32 (the quantization block)");
    }
  }
  if (!(rope_theta > 0)) return make_error("model config: rope_theta must be > 0");
  if (!(rms_norm_eps > 0) || rms_norm_eps > 1) return make_error("model config: rms_norm_eps must be in (0, 1]");
  if (bos_token_id >= vocab_size || eos_token_id >= vocab_size) {
    return make_error("model config: bos/eos token id outside the vocabulary of " + std::to_string(vocab_size));
  }
  return ok_status();
}

bool operator==(const ModelConfig& a, const ModelConfig& b) {
  return a.hidden_size == b.hidden_size && a.num_layers == b.num_layers && a.num_heads == b.num_heads &&
         a.num_kv_heads == b.num_kv_heads && a.head_dim == b.head_dim && a.ffn_size == b.ffn_size &&
         a.vocab_size == b.vocab_size && a.context_length == b.context_length && a.rope_theta == b.rope_theta &&
         a.rms_norm_eps == b.rms_norm_eps && a.tie_embeddings == b.tie_embeddings &&
         a.bos_token_id == b.bos_token_id && a.eos_token_id == b.eos_token_id;
}

Expected<ModelConfig> parse_hf_config(const std::string& json_text) {
  const json config = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return make_error("config.json: not a JSON object");
  KIPP_RETURN_IF_ERROR(require_plain_qwen3(config));
  ModelConfig out;
  KIPP_ASSIGN_OR_RETURN(out.hidden_size, read_u32(config, "hidden_size"));
  KIPP_ASSIGN_OR_RETURN(out.num_layers, read_u32(config, "num_hidden_layers"));
  KIPP_ASSIGN_OR_RETURN(out.num_heads, read_u32(config, "num_attention_heads"));
  KIPP_ASSIGN_OR_RETURN(out.num_kv_heads, read_u32(config, "num_key_value_heads"));
  KIPP_ASSIGN_OR_RETURN(out.head_dim, read_u32(config, "head_dim"));
  KIPP_ASSIGN_OR_RETURN(out.ffn_size, read_u32(config, "intermediate_size"));
  KIPP_ASSIGN_OR_RETURN(out.vocab_size, read_u32(config, "vocab_size"));
  KIPP_ASSIGN_OR_RETURN(out.context_length, read_u32(config, "max_position_embeddings"));
  KIPP_ASSIGN_OR_RETURN(out.rope_theta, read_number(config, "rope_theta"));
  KIPP_ASSIGN_OR_RETURN(out.rms_norm_eps, read_number(config, "rms_norm_eps"));
  KIPP_ASSIGN_OR_RETURN(out.bos_token_id, read_u32(config, "bos_token_id"));
  const auto tie = config.find("tie_word_embeddings");
  if (tie == config.end() || !tie->is_boolean()) return make_error("config.json: 'tie_word_embeddings' must be true or false");
  out.tie_embeddings = tie->get<bool>();
  // eos_token_id may be a list in some configs; the first is the model's own end token.
  const auto eos = config.find("eos_token_id");
  if (eos != config.end() && eos->is_array() && !eos->empty() && (*eos)[0].is_number_unsigned()) {
    out.eos_token_id = (*eos)[0].get<uint32_t>();
  } else {
    KIPP_ASSIGN_OR_RETURN(out.eos_token_id, read_u32(config, "eos_token_id"));
  }
  KIPP_RETURN_IF_ERROR(with_context(out.validate(), "config.json"));
  return out;
}

}  // namespace kipp
