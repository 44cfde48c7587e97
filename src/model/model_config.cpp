#include "model/model_config.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

namespace kipp {
namespace {

using nlohmann::json;

// Reads one field from config.json, naming the key when it is missing or of another type.
Status read_field(const json& config, const ModelConfigField& field, uint32_t& out) {
  const std::string key(field.hf_key);
  const auto it = config.find(key);
  if (it == config.end()) return make_error("config.json: missing key '" + key + "'");
  // Some configs list several end tokens; the first is the model's own.
  if (field.hf_first_of_list && it->is_array() && !it->empty() && (*it)[0].is_number_unsigned()) {
    out = (*it)[0].get<uint32_t>();
    return ok_status();
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 0xffffffffLL) {
    return make_error("config.json: '" + key + "' must be a non-negative integer, found " + it->dump());
  }
  out = static_cast<uint32_t>(it->get<int64_t>());
  return ok_status();
}

Status read_field(const json& config, const ModelConfigField& field, double& out) {
  const std::string key(field.hf_key);
  const auto it = config.find(key);
  if (it == config.end()) return make_error("config.json: missing key '" + key + "'");
  if (!it->is_number()) return make_error("config.json: '" + key + "' must be a number, found " + it->dump());
  out = it->get<double>();
  return ok_status();
}

Status read_field(const json& config, const ModelConfigField& field, bool& out) {
  const std::string key(field.hf_key);
  const auto it = config.find(key);
  if (it == config.end() || !it->is_boolean()) return make_error("config.json: '" + key + "' must be true or false");
  out = it->get<bool>();
  return ok_status();
}

std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
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
  const uint64_t per_layer = hidden * q_width() + 2 * hidden * kv_width() + q_width() * hidden + 3 * hidden * ffn_size +
                             2 * hidden + 2 * uint64_t{head_dim};
  const uint64_t embedding = uint64_t{vocab_size} * hidden;
  return embedding * (tie_embeddings ? 1 : 2) + per_layer * num_layers + hidden;
}

Status ModelConfig::validate() const {
  std::string error;
  const auto fail = [&error](const std::string& message) {
    if (error.empty()) error = "model config: " + message;
  };
  visit_config_fields(*this, [&](const ModelConfigField& field, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    const std::string name(field.hf_key);
    if constexpr (std::is_same_v<T, uint32_t>) {
      if (!field.token_id && value == 0) fail(name + " is 0 (expected > 0)");
    } else if constexpr (std::is_same_v<T, double>) {
      if (!(value > 0) || value > field.at_most) {
        fail(name + (field.at_most == std::numeric_limits<double>::infinity()
                         ? std::string(" must be > 0")
                         : " must be in (0, " + number_text(field.at_most) + "]"));
      }
    }
  });
  if (!error.empty()) return make_error(error);
  if (num_heads % num_kv_heads != 0) {
    return make_error("model config: num_attention_heads " + std::to_string(num_heads) +
                      " is not a multiple of num_key_value_heads " + std::to_string(num_kv_heads));
  }
  visit_config_fields(*this, [&](const ModelConfigField& field, const auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, uint32_t>) {
      if (value % field.multiple != 0) {
        fail(std::string(field.hf_key) + " " + std::to_string(value) + " is not a multiple of " +
             std::to_string(field.multiple) + " (" + std::string(field.multiple_why) + ")");
      }
    }
  });
  if (!error.empty()) return make_error(error);
  if (q_width() % kQuantBlock != 0) {
    return make_error("model config: attention width " + std::to_string(q_width()) + " is not a multiple of " +
                      std::to_string(kQuantBlock) + " (" + std::string(kQuantBlockWhy) + ")");
  }
  if (bos_token_id >= vocab_size || eos_token_id >= vocab_size) {
    return make_error("model config: bos/eos token id outside the vocabulary of " + std::to_string(vocab_size));
  }
  return ok_status();
}

Expected<ModelConfig> parse_hf_config(const std::string& json_text) {
  const json config = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return make_error("config.json: not a JSON object");
  KIPP_RETURN_IF_ERROR(require_plain_qwen3(config));
  ModelConfig out;
  Status status;
  visit_config_fields(out, [&](const ModelConfigField& field, auto& value) {
    if (status.ok()) status = read_field(config, field, value);
  });
  KIPP_RETURN_IF_ERROR(status);
  KIPP_RETURN_IF_ERROR(with_context(out.validate(), "config.json"));
  return out;
}

}  // namespace kipp
