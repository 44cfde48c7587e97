#include "train/parameters.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/files.h"
#include "core/half.h"
#include "core/random.h"
#include "format/safetensors.h"
#include "kernels/ref/ops.h"
#include "kernels/weights.h"
#include "model/model.h"
#include "xxhash.h"

namespace kipp::train {
namespace {

bool ends_with(const std::string& text, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return text.size() >= n && text.compare(text.size() - n, n, suffix) == 0;
}

}  // namespace

ParameterLayout::ParameterLayout(const ModelConfig& config) : config_(config) {
  const uint64_t hidden = config.hidden_size, head_dim = config.head_dim;
  auto add = [&](std::string name, std::vector<uint64_t> shape, ParamKind kind) {
    uint64_t count = 1;
    for (uint64_t d : shape) count *= d;
    tensors_.push_back({std::move(name), std::move(shape), total_, count, kind});
    total_ += count;
    return tensors_.back().offset;
  };
  embedding_ = add("model.embed_tokens.weight", {config.vocab_size, hidden}, ParamKind::Embedding);
  for (uint32_t i = 0; i < config.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerOffsets l{};
    l.attn_norm = add(p + "input_layernorm.weight", {hidden}, ParamKind::Norm);
    l.q_proj = add(p + "self_attn.q_proj.weight", {config.q_width(), hidden}, ParamKind::Projection);
    l.k_proj = add(p + "self_attn.k_proj.weight", {config.kv_width(), hidden}, ParamKind::Projection);
    l.v_proj = add(p + "self_attn.v_proj.weight", {config.kv_width(), hidden}, ParamKind::Projection);
    l.q_norm = add(p + "self_attn.q_norm.weight", {head_dim}, ParamKind::Norm);
    l.k_norm = add(p + "self_attn.k_norm.weight", {head_dim}, ParamKind::Norm);
    l.o_proj = add(p + "self_attn.o_proj.weight", {hidden, config.q_width()}, ParamKind::Projection);
    l.ffn_norm = add(p + "post_attention_layernorm.weight", {hidden}, ParamKind::Norm);
    l.gate_proj = add(p + "mlp.gate_proj.weight", {config.ffn_size, hidden}, ParamKind::Projection);
    l.up_proj = add(p + "mlp.up_proj.weight", {config.ffn_size, hidden}, ParamKind::Projection);
    l.down_proj = add(p + "mlp.down_proj.weight", {hidden, config.ffn_size}, ParamKind::Projection);
    layers_.push_back(l);
  }
  final_norm_ = add("model.norm.weight", {hidden}, ParamKind::Norm);
  head_ = config.tie_embeddings ? embedding_ : add("lm_head.weight", {config.vocab_size, hidden}, ParamKind::Head);
}

const ParamTensor* ParameterLayout::find(std::string_view name) const {
  for (const ParamTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void init_parameters(const ParameterLayout& layout, const InitOptions& options, std::span<float> values) {
  const double residual_std = options.std / std::sqrt(2.0 * std::max<uint32_t>(1, layout.config().num_layers));
  for (const ParamTensor& t : layout.tensors()) {
    float* out = values.data() + t.offset;
    if (t.kind == ParamKind::Norm) {
      std::fill(out, out + t.count, 1.0f);
      continue;
    }
    const bool residual = ends_with(t.name, "o_proj.weight") || ends_with(t.name, "down_proj.weight");
    const double std = options.scaled_residual && residual ? residual_std : options.std;
    const uint64_t key = XXH3_64bits_withSeed(t.name.data(), t.name.size(), options.seed);
    // Box-Muller on pairs of counter-derived uniforms.
    for (uint64_t i = 0; i < t.count; i += 2) {
      const double u1 = uniform_open(counter_random(key, i));
      const double u2 = uniform_open(counter_random(key, i + 1));
      const double radius = std::sqrt(-2.0 * std::log(u1)) * std;
      out[i] = float(radius * std::cos(2.0 * M_PI * u2));
      if (i + 1 < t.count) out[i + 1] = float(radius * std::sin(2.0 * M_PI * u2));
    }
  }
}

namespace {

Status load_from_hf(const ParameterLayout& layout, const std::string& dir, std::span<float> values) {
  KIPP_ASSIGN_OR_RETURN(std::string config_text, read_text_file(dir + "/config.json"));
  KIPP_ASSIGN_OR_RETURN(ModelConfig source_config, parse_hf_config(config_text));
  KIPP_RETURN_IF_ERROR(check_model_dimensions(layout.config(), source_config, dir, false));
  KIPP_ASSIGN_OR_RETURN(SafetensorsCheckpoint checkpoint, SafetensorsCheckpoint::open_dir(dir));
  for (const ParamTensor& t : layout.tensors()) {
    std::string source_name = t.name;
    if (t.kind == ParamKind::Head && !checkpoint.find(source_name)) source_name = "model.embed_tokens.weight";
    const SafetensorsTensor* source = checkpoint.find(source_name);
    if (!source) return make_error(dir + ": tensor " + t.name + " is missing");
    if (source->shape != t.shape) {
      return make_error(dir + ": tensor " + t.name + " has shape " + shape_text(source->shape) + ", expected " +
                        shape_text(t.shape));
    }
    const std::span<const uint8_t> bytes = checkpoint.data(source_name);
    KIPP_RETURN_IF_ERROR(with_context(safetensors_to_f32(*source, bytes, values.subspan(t.offset, t.count)), dir));
  }
  return {};
}

const TensorView& view_for(const Qwen3Weights& w, const TensorSpec& spec) {
  if (spec.layer < 0) {
    switch (spec.role) {
      case TensorRole::Embedding: return w.token_embedding;
      case TensorRole::OutputNorm: return w.output_norm;
      default: return w.output;
    }
  }
  const LayerWeights& l = w.layers[size_t(spec.layer)];
  switch (spec.role) {
    case TensorRole::AttnNorm: return l.attn_norm;
    case TensorRole::AttnQ: return l.attn_q;
    case TensorRole::AttnK: return l.attn_k;
    case TensorRole::AttnV: return l.attn_v;
    case TensorRole::AttnOutput: return l.attn_output;
    case TensorRole::AttnQNorm: return l.attn_q_norm;
    case TensorRole::AttnKNorm: return l.attn_k_norm;
    case TensorRole::FfnNorm: return l.ffn_norm;
    case TensorRole::FfnGate: return l.ffn_gate;
    case TensorRole::FfnUp: return l.ffn_up;
    default: return l.ffn_down;
  }
}

Status load_from_gguf(const ParameterLayout& layout, const std::string& path, std::span<float> values) {
  KIPP_ASSIGN_OR_RETURN(Model model, Model::open(path));
  KIPP_RETURN_IF_ERROR(check_model_dimensions(layout.config(), model.config(), path, false));
  const Qwen3Weights& weights = model.weights();
  for (const TensorSpec& spec : expected_tensors(model.config(), QuantScheme::BF16)) {
    const ParamTensor* target = layout.find(spec.hf_name);
    if (!target) continue;  // a tied file's lm_head entry when the layout is tied as well
    const TensorView& view = view_for(weights, spec);
    const kernels::WeightMatrix matrix = kernels::make_weight_matrix(view.type, view.data, view.rows, view.cols);
    if (matrix.row_bytes == 0)
      return make_error(path + ": tensor " + std::string(view.name) + " has an unsupported type");
    for (size_t row = 0; row < view.rows; ++row) {
      kernels::ref::dequantize_row(matrix, row, values.data() + target->offset + row * view.cols);
    }
  }
  if (!layout.config().tie_embeddings && model.config().tie_embeddings) {
    const ParamTensor* head = layout.find("lm_head.weight");
    std::memcpy(values.data() + head->offset, values.data() + layout.embedding(), head->count * 4);
  }
  return {};
}

}  // namespace

Status check_model_dimensions(const ModelConfig& want, const ModelConfig& got, const std::string& source,
                              bool require_same_tying) {
  std::string differences;
  visit_config_members([&](const ModelConfigField& field, auto member) {
    if constexpr (std::is_same_v<std::decay_t<decltype(want.*member)>, uint32_t>) {
      if (field.shapes_tensors && want.*member != got.*member) {
        differences += std::string(differences.empty() ? "" : ", ") + std::string(field.hf_key) + " " +
                       std::to_string(got.*member) + " (expected " + std::to_string(want.*member) + ")";
      }
    }
  });
  // Loosely, a tied source may fill an untied layout (lm_head starts as the embedding), but an
  // untied source's own lm_head must not be dropped.
  const bool tying_differs =
      require_same_tying ? want.tie_embeddings != got.tie_embeddings : want.tie_embeddings && !got.tie_embeddings;
  if (tying_differs) {
    const auto text = [](bool value) { return value ? "true" : "false"; };
    differences += std::string(differences.empty() ? "" : ", ") + "tie_word_embeddings " + text(got.tie_embeddings) +
                   " (expected " + text(want.tie_embeddings) + ")";
  }
  if (differences.empty()) return {};
  return make_error(source + " describes another model: " + differences +
                    "; the training config's model section must match it (e.g. --set model.vocab_size=" +
                    std::to_string(got.vocab_size) + ")");
}

Status load_parameters(const ParameterLayout& layout, const std::string& path, std::span<float> values) {
  if (values.size() != layout.total()) return make_error("load_parameters: buffer size does not match the layout");
  if (ends_with(path, ".gguf")) return load_from_gguf(layout, path, values);
  if (!file_exists(path + "/config.json")) {
    return make_error(path + ": not a GGUF file nor a checkpoint folder with config.json");
  }
  return load_from_hf(layout, path, values);
}

Status save_parameters(const ParameterLayout& layout, std::span<const float> values, const std::string& path) {
  std::vector<SafetensorsWriteTensor> tensors;
  for (const ParamTensor& t : layout.tensors()) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(values.data() + t.offset);
    tensors.push_back({t.name, SafetensorsDtype::F32, t.shape, std::span<const uint8_t>(bytes, t.count * 4)});
  }
  return write_safetensors(path, tensors, {{"format", "pt"}});
}

}  // namespace kipp::train
