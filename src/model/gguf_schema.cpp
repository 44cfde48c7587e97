#include "model/gguf_schema.h"

#include <algorithm>
#include <type_traits>
#include <utility>

namespace kipp {
namespace {

struct LayerTensorName {
  TensorRole role;
  const char* gguf_suffix;
  const char* hf_suffix;
};

constexpr LayerTensorName kLayerTensors[] = {
    {TensorRole::AttnNorm, "attn_norm", "input_layernorm"},
    {TensorRole::AttnQ, "attn_q", "self_attn.q_proj"},
    {TensorRole::AttnK, "attn_k", "self_attn.k_proj"},
    {TensorRole::AttnV, "attn_v", "self_attn.v_proj"},
    {TensorRole::AttnOutput, "attn_output", "self_attn.o_proj"},
    {TensorRole::AttnQNorm, "attn_q_norm", "self_attn.q_norm"},
    {TensorRole::AttnKNorm, "attn_k_norm", "self_attn.k_norm"},
    {TensorRole::FfnNorm, "ffn_norm", "post_attention_layernorm"},
    {TensorRole::FfnGate, "ffn_gate", "mlp.gate_proj"},
    {TensorRole::FfnUp, "ffn_up", "mlp.up_proj"},
    {TensorRole::FfnDown, "ffn_down", "mlp.down_proj"},
};

bool is_projection(TensorRole role) {
  switch (role) {
    case TensorRole::AttnQ:
    case TensorRole::AttnK:
    case TensorRole::AttnV:
    case TensorRole::AttnOutput:
    case TensorRole::FfnGate:
    case TensorRole::FfnUp:
    case TensorRole::FfnDown: return true;
    default: return false;
  }
}

// ggml dims (columns first) of a layer tensor.
std::vector<uint64_t> layer_tensor_dims(TensorRole role, const ModelConfig& c) {
  const uint64_t hidden = c.hidden_size;
  switch (role) {
    case TensorRole::AttnNorm:
    case TensorRole::FfnNorm: return {hidden};
    case TensorRole::AttnQNorm:
    case TensorRole::AttnKNorm: return {c.head_dim};
    case TensorRole::AttnQ: return {hidden, c.q_width()};
    case TensorRole::AttnK:
    case TensorRole::AttnV: return {hidden, c.kv_width()};
    case TensorRole::AttnOutput: return {c.q_width(), hidden};
    case TensorRole::FfnGate:
    case TensorRole::FfnUp: return {hidden, c.ffn_size};
    case TensorRole::FfnDown: return {c.ffn_size, hidden};
    default: return {};
  }
}

template <typename T>
Expected<const GgufValue*> require_typed(const GgufFile& file, std::string_view key, GgufValueType type) {
  const GgufValue* value = file.find(key);
  if (value == nullptr) return make_error("GGUF metadata: required key '" + std::string(key) + "' is missing");
  if (value->type() != type) {
    return make_error("GGUF metadata: '" + std::string(key) + "' has type " +
                      std::string(gguf_value_type_name(value->type())) + " (expected " +
                      std::string(gguf_value_type_name(type)) + ")");
  }
  return value;
}

}  // namespace

std::string_view quant_scheme_name(QuantScheme scheme) {
  switch (scheme) {
    case QuantScheme::BF16: return "bf16";
    case QuantScheme::Q8_0: return "q8_0";
    case QuantScheme::Affine4: return "affine4_gs32";
  }
  return "unknown";
}

std::optional<QuantScheme> parse_quant_scheme(std::string_view name) {
  if (name == "bf16") return QuantScheme::BF16;
  if (name == "q8_0") return QuantScheme::Q8_0;
  if (name == "affine4" || name == "affine4_gs32") return QuantScheme::Affine4;
  return std::nullopt;
}

GgmlType projection_type(QuantScheme scheme) {
  switch (scheme) {
    case QuantScheme::BF16: return GgmlType::BF16;
    case QuantScheme::Q8_0: return GgmlType::Q8_0;
    case QuantScheme::Affine4: return GgmlType::Q4_1;
  }
  return GgmlType::BF16;
}

uint32_t gguf_file_type(QuantScheme scheme) {
  switch (scheme) {
    case QuantScheme::BF16: return 32;
    case QuantScheme::Q8_0: return 7;
    case QuantScheme::Affine4: return 3;
  }
  return 0;
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& config, QuantScheme scheme) {
  const uint64_t hidden = config.hidden_size;
  std::vector<TensorSpec> specs;
  specs.push_back({"token_embd.weight",
                   "model.embed_tokens.weight",
                   TensorRole::Embedding,
                   -1,
                   {hidden, config.vocab_size},
                   GgmlType::BF16});
  for (uint32_t layer = 0; layer < config.num_layers; ++layer) {
    const std::string index = std::to_string(layer);
    for (const auto& tensor : kLayerTensors) {
      const bool projection = is_projection(tensor.role);
      specs.push_back({"blk." + index + "." + tensor.gguf_suffix + ".weight",
                       "model.layers." + index + "." + tensor.hf_suffix + ".weight", tensor.role,
                       static_cast<int>(layer), layer_tensor_dims(tensor.role, config),
                       projection ? projection_type(scheme) : GgmlType::F32});
    }
  }
  specs.push_back({"output_norm.weight", "model.norm.weight", TensorRole::OutputNorm, -1, {hidden}, GgmlType::F32});
  if (!config.tie_embeddings) {
    specs.push_back(
        {"output.weight", "lm_head.weight", TensorRole::Output, -1, {hidden, config.vocab_size}, GgmlType::BF16});
  }
  return specs;
}

void add_model_metadata(GgufWriter& writer, const ModelConfig& config, const std::string& name, QuantScheme scheme) {
  using namespace gguf_key;
  writer.add_metadata(std::string(kArchitecture), GgufValue::string("qwen3"));
  writer.add_metadata(std::string(kType), GgufValue::string("model"));
  writer.add_metadata(std::string(kName), GgufValue::string(name));
  // In llama.cpp's order of the hyper-parameter keys (gguf_order), as its own files have them.
  std::vector<std::pair<int, GgufMetadataEntry>> entries;
  visit_config_fields(config, [&](const ModelConfigField& field, const auto& value) {
    if (field.gguf_home != GgufHome::HyperParameter) return;
    // GGUF stores real hyper-parameters as f32.
    const GgufValue stored = std::is_same_v<std::decay_t<decltype(value)>, double>
                                 ? GgufValue::f32(static_cast<float>(value))
                                 : GgufValue::u32(static_cast<uint32_t>(value));
    entries.push_back({field.gguf_order, {std::string(field.gguf_key), stored}});
    if (!field.gguf_twin.empty()) entries.push_back({field.gguf_order, {std::string(field.gguf_twin), stored}});
  });
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, entry] : entries) writer.add_metadata(std::move(entry.key), std::move(entry.value));
  writer.add_metadata(std::string(kFileType), GgufValue::u32(gguf_file_type(scheme)));
  writer.add_metadata(std::string(kQuantizationVersion), GgufValue::u32(2));
}

Expected<uint32_t> require_u32(const GgufFile& file, std::string_view key) {
  KIPP_ASSIGN_OR_RETURN(const GgufValue* value, require_typed<uint32_t>(file, key, GgufValueType::UINT32));
  return static_cast<uint32_t>(*value->as_uint());
}

Expected<float> require_f32(const GgufFile& file, std::string_view key) {
  KIPP_ASSIGN_OR_RETURN(const GgufValue* value, require_typed<float>(file, key, GgufValueType::FLOAT32));
  return static_cast<float>(*value->as_float());
}

Expected<std::string> require_string(const GgufFile& file, std::string_view key) {
  KIPP_ASSIGN_OR_RETURN(const GgufValue* value, require_typed<std::string>(file, key, GgufValueType::STRING));
  return *value->as_string();
}

Expected<ModelConfig> read_model_metadata(const GgufFile& file) {
  using namespace gguf_key;
  KIPP_ASSIGN_OR_RETURN(const std::string architecture, require_string(file, kArchitecture));
  if (architecture != "qwen3") {
    return make_error("GGUF metadata: general.architecture is '" + architecture + "' (expected 'qwen3')");
  }
  ModelConfig config;
  Status status;
  visit_config_fields(config, [&](const ModelConfigField& field, auto& value) {
    if (field.gguf_home != GgufHome::HyperParameter || !status.ok()) return;
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, double>) {
      auto stored = require_f32(file, field.gguf_key);
      if (!stored.ok())
        status = stored.error();
      else
        value = *stored;
    } else if constexpr (std::is_same_v<std::decay_t<decltype(value)>, uint32_t>) {
      auto stored = require_u32(file, field.gguf_key);
      if (!stored.ok())
        status = stored.error();
      else
        value = *stored;
      if (!field.gguf_twin.empty() && status.ok()) {
        auto twin = require_u32(file, field.gguf_twin);
        if (!twin.ok()) {
          status = twin.error();
        } else if (*twin != value) {
          status =
              make_error("GGUF metadata: " + std::string(field.gguf_twin) + " is " + std::to_string(*twin) +
                         " (expected " + std::to_string(value) + ", the value of " + std::string(field.gguf_key) + ")");
        }
      }
    }
  });
  KIPP_RETURN_IF_ERROR(status);
  return config;
}

void add_provenance_metadata(GgufWriter& writer, const Provenance& provenance) {
  using namespace gguf_key;
  writer.add_metadata(std::string(kKippFormatVersion), GgufValue::u32(kKippFileFormatVersion));
  const bool registry = provenance.kind == ProvenanceKind::Registry;
  writer.add_metadata(std::string(kKippProvenance), GgufValue::string(registry ? "registry" : "local"));
  if (registry) {
    writer.add_metadata(std::string(kKippRepository), GgufValue::string(provenance.repository));
    writer.add_metadata(std::string(kKippRevision), GgufValue::string(provenance.revision));
  } else {
    writer.add_metadata(std::string(kKippLocalConfig), GgufValue::string(provenance.local_config));
  }
  writer.add_metadata(std::string(kKippVariant), GgufValue::string(std::string(variant_name(provenance.variant))));
  writer.add_metadata(std::string(kKippQuantScheme),
                      GgufValue::string(std::string(quant_scheme_name(provenance.scheme))));
  writer.add_metadata(std::string(kKippStopTokenIds), GgufValue::u32_array(provenance.stop_token_ids));
  writer.add_metadata(std::string(kKippTiedLmHead), GgufValue::boolean(provenance.dropped_tied_lm_head));
  writer.add_metadata(std::string(kKippContentHash), GgufValue::string(provenance.content_hash));
}

Expected<Provenance> read_provenance_metadata(const GgufFile& file) {
  using namespace gguf_key;
  Provenance provenance;
  KIPP_ASSIGN_OR_RETURN(const uint32_t version, require_u32(file, kKippFormatVersion));
  if (version != kKippFileFormatVersion) {
    return make_error("GGUF metadata: kipp.format_version is " + std::to_string(version) + " (expected " +
                      std::to_string(kKippFileFormatVersion) + ")");
  }
  KIPP_ASSIGN_OR_RETURN(const std::string kind, require_string(file, kKippProvenance));
  if (kind == "registry") {
    provenance.kind = ProvenanceKind::Registry;
    KIPP_ASSIGN_OR_RETURN(provenance.repository, require_string(file, kKippRepository));
    KIPP_ASSIGN_OR_RETURN(provenance.revision, require_string(file, kKippRevision));
  } else if (kind == "local") {
    provenance.kind = ProvenanceKind::Local;
    KIPP_ASSIGN_OR_RETURN(provenance.local_config, require_string(file, kKippLocalConfig));
  } else {
    return make_error("GGUF metadata: kipp.provenance is '" + kind + "' (expected 'registry' or 'local')");
  }
  KIPP_ASSIGN_OR_RETURN(const std::string variant, require_string(file, kKippVariant));
  const auto parsed_variant = parse_variant(variant);
  if (!parsed_variant) {
    return make_error("GGUF metadata: kipp.variant is '" + variant + "' (expected base, instruct or thinking)");
  }
  provenance.variant = *parsed_variant;
  KIPP_ASSIGN_OR_RETURN(const std::string scheme, require_string(file, kKippQuantScheme));
  const auto parsed_scheme = parse_quant_scheme(scheme);
  if (!parsed_scheme || scheme == "affine4") {
    return make_error("GGUF metadata: kipp.quant.scheme is '" + scheme + "' (expected bf16, q8_0 or affine4_gs32)");
  }
  provenance.scheme = *parsed_scheme;
  const GgufValue* stops = file.find(kKippStopTokenIds);
  const auto* stop_items = stops ? stops->as_array() : nullptr;
  if (stop_items == nullptr || stops->array_type() != GgufValueType::UINT32) {
    return make_error("GGUF metadata: kipp.stop_token_ids must be an array of uint32");
  }
  for (const auto& item : *stop_items) provenance.stop_token_ids.push_back(static_cast<uint32_t>(*item.as_uint()));
  const GgufValue* tied = file.find(kKippTiedLmHead);
  if (tied == nullptr || !tied->as_bool()) return make_error("GGUF metadata: kipp.source.tied_lm_head must be a bool");
  provenance.dropped_tied_lm_head = *tied->as_bool();
  KIPP_ASSIGN_OR_RETURN(provenance.content_hash, require_string(file, kKippContentHash));
  return provenance;
}

}  // namespace kipp
