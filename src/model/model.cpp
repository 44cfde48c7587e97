#include "model/model.h"

#include <map>
#include <sstream>
#include <type_traits>

#include "model/content_hash.h"

namespace kipp {
namespace {

std::string format_number(double value) {
  std::ostringstream out;
  out.precision(9);
  out << value;
  return out.str();
}

// Lists every field where `found` differs from `expected`, naming both values.
Status compare_configs(const ModelConfig& expected, const ModelConfig& found, const std::string& against) {
  std::string mismatches;
  visit_config_members([&](const ModelConfigField& field, auto member) {
    if (expected.*member == found.*member) return;
    if (!mismatches.empty()) mismatches += "; ";
    mismatches += std::string(field.hf_key) + " (" + field.gguf_source() + "): expected " +
                  format_number(double(expected.*member)) + ", found " + format_number(double(found.*member));
  });
  if (mismatches.empty()) return ok_status();
  return make_error("model does not match " + against + ": " + mismatches);
}

std::string describe_dims(const std::vector<uint64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

TensorView make_view(const GgufFile& file, const GgufTensorInfo& info) {
  TensorView view;
  view.name = info.name;
  view.type = info.type;
  view.cols = info.dims[0];
  view.rows = info.dims.size() > 1 ? info.dims[1] : 1;
  view.data = file.tensor_data(info).data();
  view.bytes = info.size_bytes;
  return view;
}

TensorView* layer_slot(LayerWeights& layer, TensorRole role) {
  switch (role) {
    case TensorRole::AttnNorm: return &layer.attn_norm;
    case TensorRole::AttnQ: return &layer.attn_q;
    case TensorRole::AttnK: return &layer.attn_k;
    case TensorRole::AttnV: return &layer.attn_v;
    case TensorRole::AttnOutput: return &layer.attn_output;
    case TensorRole::AttnQNorm: return &layer.attn_q_norm;
    case TensorRole::AttnKNorm: return &layer.attn_k_norm;
    case TensorRole::FfnNorm: return &layer.ffn_norm;
    case TensorRole::FfnGate: return &layer.ffn_gate;
    case TensorRole::FfnUp: return &layer.ffn_up;
    case TensorRole::FfnDown: return &layer.ffn_down;
    default: return nullptr;
  }
}

Qwen3Weights bind_weights(const GgufFile& file, const ModelConfig& config, QuantScheme scheme) {
  Qwen3Weights weights;
  weights.layers.resize(config.num_layers);
  for (const auto& spec : expected_tensors(config, scheme)) {
    const TensorView view = make_view(file, *file.find_tensor(spec.gguf_name));
    switch (spec.role) {
      case TensorRole::Embedding: weights.token_embedding = view; break;
      case TensorRole::OutputNorm: weights.output_norm = view; break;
      case TensorRole::Output: weights.output = view; break;
      default: *layer_slot(weights.layers[static_cast<size_t>(spec.layer)], spec.role) = view;
    }
  }
  if (config.tie_embeddings) weights.output = weights.token_embedding;
  return weights;
}

Status verify_content_hash(const GgufFile& file, const std::string& recorded) {
  ContentHasher hasher;
  for (const auto& tensor : file.tensors()) {
    hasher.add_tensor(tensor.name, tensor.type, tensor.dims, file.tensor_data(tensor));
  }
  const std::string actual = hasher.finish_hex();
  if (actual != recorded) {
    return make_error("tensor data does not match kipp.content_hash: recorded " + recorded + ", computed " + actual +
                      " (the file was altered or corrupted after conversion)");
  }
  return ok_status();
}

}  // namespace

ModelConfig as_stored_in_gguf(ModelConfig config) {
  config.rope_theta = static_cast<float>(config.rope_theta);
  config.rms_norm_eps = static_cast<float>(config.rms_norm_eps);
  return config;
}

Expected<ModelConfig> validate_model_metadata(const GgufFile& file, const Provenance& provenance,
                                              const RegistryEntry** entry_out) {
  KIPP_ASSIGN_OR_RETURN(ModelConfig config, read_model_metadata(file));
  Status status;
  visit_config_fields(config, [&](const ModelConfigField& field, auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>) {
      if (field.gguf_home == GgufHome::TensorAbsence) value = file.find_tensor(field.gguf_key) == nullptr;
    } else if (field.gguf_home == GgufHome::TokenizerKey && status.ok()) {
      auto id = require_u32(file, field.gguf_key);
      if (id.ok())
        value = *id;
      else
        status = id.error();
    }
  });
  KIPP_RETURN_IF_ERROR(status);
  KIPP_RETURN_IF_ERROR(with_context(config.validate(), "GGUF metadata"));
  KIPP_ASSIGN_OR_RETURN(const uint32_t file_type, require_u32(file, gguf_key::kFileType));
  if (file_type != gguf_file_type(provenance.scheme)) {
    return make_error("GGUF metadata: general.file_type is " + std::to_string(file_type) + " (expected " +
                      std::to_string(gguf_file_type(provenance.scheme)) + " for kipp.quant.scheme " +
                      std::string(quant_scheme_name(provenance.scheme)) + ")");
  }
  if (provenance.kind == ProvenanceKind::Registry) {
    const RegistryEntry* entry = Registry::builtin().find(provenance.repository);
    if (entry == nullptr || entry->id != provenance.repository) {
      return make_error("kipp.source.repository '" + provenance.repository +
                        "' is not in the registry (see `kipp registry`)");
    }
    if (entry->revision != provenance.revision) {
      return make_error("kipp.source.revision of " + entry->id + " is " + provenance.revision +
                        " (expected the pinned revision " + entry->revision + ")");
    }
    KIPP_RETURN_IF_ERROR(compare_configs(as_stored_in_gguf(entry->config), config, "registry entry " + entry->id));
    if (entry->variant != provenance.variant) {
      return make_error("kipp.variant is " + std::string(variant_name(provenance.variant)) + " (expected " +
                        std::string(variant_name(entry->variant)) + " for " + entry->id + ")");
    }
    if (entry->stop_token_ids != provenance.stop_token_ids) {
      return make_error("kipp.stop_token_ids differ from the registry entry " + entry->id);
    }
    if (entry_out) *entry_out = entry;
  } else {
    auto local = parse_hf_config(provenance.local_config);
    if (!local.ok()) return make_error("kipp.local.config: " + local.message());
    KIPP_RETURN_IF_ERROR(compare_configs(as_stored_in_gguf(*local), config, "its recorded kipp.local.config"));
    if (entry_out) *entry_out = nullptr;
  }
  for (uint32_t id : provenance.stop_token_ids) {
    if (id >= config.vocab_size) {
      return make_error("kipp.stop_token_ids: " + std::to_string(id) + " is outside the vocabulary of " +
                        std::to_string(config.vocab_size));
    }
  }
  return config;
}

Status validate_tensor_directory(const GgufFile& file, const ModelConfig& config, QuantScheme scheme) {
  const auto specs = expected_tensors(config, scheme);
  std::map<std::string_view, const TensorSpec*> expected;
  for (const auto& spec : specs) expected[spec.gguf_name] = &spec;
  for (const auto& tensor : file.tensors()) {
    if (expected.find(tensor.name) == expected.end()) {
      return make_error("unknown tensor '" + tensor.name + "' (not part of a Qwen3 model with " +
                        std::to_string(config.num_layers) + " layers" +
                        (config.tie_embeddings ? ", tied embeddings" : "") + ")");
    }
  }
  for (const auto& spec : specs) {
    const GgufTensorInfo* tensor = file.find_tensor(spec.gguf_name);
    if (tensor == nullptr) return make_error("missing tensor '" + spec.gguf_name + "'");
    if (tensor->dims != spec.dims) {
      return make_error("tensor '" + spec.gguf_name + "': shape " + describe_dims(tensor->dims) + " (expected " +
                        describe_dims(spec.dims) + ")");
    }
    if (tensor->type != spec.type) {
      return make_error("tensor '" + spec.gguf_name + "': type " + std::string(ggml_type_name(tensor->type)) +
                        " (expected " + std::string(ggml_type_name(spec.type)) + " for scheme " +
                        std::string(quant_scheme_name(scheme)) + ")");
    }
  }
  if (file.tensors().size() != specs.size()) {
    return make_error("tensor count " + std::to_string(file.tensors().size()) + " (expected " +
                      std::to_string(specs.size()) + ")");
  }
  return ok_status();
}

Expected<Model> Model::open(const std::string& path, const LoadOptions& options) {
  auto state = std::make_unique<State>();
  KIPP_ASSIGN_OR_RETURN(state->mapping, MappedFile::open(path));
  auto parsed = GgufFile::parse(state->mapping.bytes());
  if (!parsed.ok()) return make_error(path + ": " + parsed.message());
  state->gguf = std::move(parsed).value();
  const GgufFile& file = state->gguf;
  auto fail = [&path](const Error& error) { return make_error(path + ": " + error.message); };

  auto provenance = read_provenance_metadata(file);
  if (!provenance.ok()) return fail(provenance.error());
  state->provenance = std::move(provenance).value();
  auto config = validate_model_metadata(file, state->provenance, &state->registry_entry);
  if (!config.ok()) return fail(config.error());
  state->config = config.value();
  auto tokenizer = read_tokenizer_metadata(file, state->config.vocab_size);
  if (!tokenizer.ok()) return fail(tokenizer.error());
  state->tokenizer = std::move(tokenizer).value();
  if (auto status = validate_tensor_directory(file, state->config, state->provenance.scheme); !status.ok()) {
    return fail(status.error());
  }
  if (options.verify_content_hash) {
    if (auto status = verify_content_hash(file, state->provenance.content_hash); !status.ok()) {
      return fail(status.error());
    }
  }
  state->weights = bind_weights(file, state->config, state->provenance.scheme);
  Model model;
  model.state_ = std::move(state);
  return model;
}

}  // namespace kipp
