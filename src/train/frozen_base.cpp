#include "train/frozen_base.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <optional>
#include <utility>

#include "core/files.h"
#include "core/half.h"
#include "core/large_buffer.h"
#include "core/mapped_file.h"
#include "format/safetensors.h"
#include "model/model.h"
#include "train/parameters.h"

namespace kipp::train {
namespace {

using kernels::WeightMatrix;

// Rows placed at a time (whole 16-row panels), so an HF tensor converted to BF16 or a GGUF
// tensor's mapped pages are never resident twice in full.
constexpr size_t kPieceRows = 4096;

// Writes rows [first, first + count) of a matrix, in its memory type, to `out`.
using RowSource = std::function<void(size_t first, size_t count, uint8_t* out)>;

struct Placement {
  WeightMatrix* target = nullptr;  // shape and type set; data filled once placed
  RowSource rows;
  bool drop_source_pages = false;  // the source is a mapping whose pages can go once copied
};

class StoredBase final : public FrozenBase {
 public:
  const ModelConfig& config() const override { return config_; }
  std::string storage() const override {
    std::string kind;
    for (const FrozenLayer& layer : weights_.layers) {
      for (const WeightMatrix& w : layer.projections) {
        const std::string name = w.type == GgmlType::Q4_1 ? "affine4" : std::string(ggml_type_name(w.type));
        std::string lower;
        for (char c : name) lower += char(std::tolower(static_cast<unsigned char>(c)));
        if (kind.empty()) kind = lower;
        if (kind != lower) return "mixed";
      }
    }
    return kind;
  }
  uint64_t bytes() const override { return bytes_; }
  const FrozenWeights& weights() const override { return weights_; }

  // Copies every placement into one buffer, packed the way the kernel table reads BF16 fastest.
  Status place(std::vector<Placement>& placements);
  // Adds the bytes of the matrices left in the GGUF mapping and of the gains.
  void count_views(const std::vector<const WeightMatrix*>& owned);

  ModelConfig config_;
  std::optional<Model> model_;  // a GGUF source's mapping, which unplaced matrices view
  LargeBuffer owned_;
  uint64_t owned_bytes_ = 0;
  uint64_t bytes_ = 0;
  FrozenWeights weights_;
};

bool is_packed_bf16(const kernels::KernelTable& k, const WeightMatrix& w) {
  return w.type == GgmlType::BF16 && k.packs_weights != nullptr && k.packs_weights(w);
}

Status StoredBase::place(std::vector<Placement>& placements) {
  const kernels::KernelTable& k = *weights_.kernels;
  std::vector<size_t> offsets;
  for (const Placement& p : placements) {
    offsets.push_back(owned_bytes_);
    owned_bytes_ += (p.target->rows * p.target->row_bytes + 63) / 64 * 64;
  }
  if (owned_bytes_ == 0) return {};
  owned_ = allocate_large_buffer(owned_bytes_);
  if (!owned_) return make_error("LoRA base: cannot allocate " + std::to_string(owned_bytes_) + " bytes of weights");
  std::vector<uint8_t> piece;
  for (size_t i = 0; i < placements.size(); ++i) {
    WeightMatrix& w = *placements[i].target;
    uint8_t* out = owned_.get() + offsets[i];
    const bool pack = is_packed_bf16(k, w);
    for (size_t first = 0; first < w.rows; first += kPieceRows) {
      const size_t count = std::min(kPieceRows, w.rows - first);
      piece.resize(count * w.row_bytes);
      placements[i].rows(first, count, piece.data());
      if (pack) {
        WeightMatrix part = w;
        part.data = piece.data();
        part.rows = count;
        k.pack_weights(part, out + first * w.row_bytes);
      } else {
        std::memcpy(out + first * w.row_bytes, piece.data(), piece.size());
      }
      if (placements[i].drop_source_pages && w.data) drop_mapped_pages({w.data + first * w.row_bytes, piece.size()});
    }
    w.data = out;
    w.panels = pack;
  }
  return {};
}

void StoredBase::count_views(const std::vector<const WeightMatrix*>& owned) {
  bytes_ = owned_bytes_;
  auto viewed = [&](const WeightMatrix& w) {
    return std::none_of(owned.begin(), owned.end(), [&](const WeightMatrix* o) { return o->data == w.data; });
  };
  std::vector<const uint8_t*> seen;
  auto add_view = [&](const WeightMatrix& w) {
    if (!viewed(w) || std::find(seen.begin(), seen.end(), w.data) != seen.end()) return;
    seen.push_back(w.data);
    bytes_ += w.rows * w.row_bytes;
  };
  add_view(weights_.embedding);
  add_view(weights_.head);
  uint64_t gains = weights_.final_norm.size();
  for (const FrozenLayer& layer : weights_.layers) {
    for (const WeightMatrix& w : layer.projections) add_view(w);
    gains += layer.attn_norm.size() + layer.q_norm.size() + layer.k_norm.size() + layer.ffn_norm.size();
  }
  bytes_ += gains * sizeof(float);
}

// ---- GGUF: matrices kept in their stored types; BF16 ones the table packs are copied packed,
// the rest (quantized ones, which the kernels read as stored) stay views into the mapping.

Expected<std::vector<float>> gain_from(const TensorView& view) {
  const WeightMatrix w = kernels::make_weight_matrix(view.type, view.data, view.rows, view.cols);
  if (w.row_bytes == 0) return make_error("tensor " + std::string(view.name) + " has an unsupported type");
  std::vector<float> values(view.rows * view.cols);
  for (size_t r = 0; r < w.rows; ++r) kernels::ref::dequantize_row(w, r, values.data() + r * w.cols);
  return values;
}

Expected<WeightMatrix> matrix_from(const TensorView& view) {
  const WeightMatrix w = kernels::make_weight_matrix(view.type, view.data, view.rows, view.cols);
  if (w.row_bytes == 0) {
    return make_error("tensor " + std::string(view.name) + ": type " + std::string(ggml_type_name(view.type)) +
                      " is not one the kernels multiply");
  }
  return w;
}

Status open_gguf(StoredBase& base, const std::string& path) {
  KIPP_ASSIGN_OR_RETURN(Model model, Model::open(path));
  KIPP_RETURN_IF_ERROR(check_model_dimensions(base.config_, model.config(), path, false));
  base.model_.emplace(std::move(model));
  const Qwen3Weights& source = base.model_->weights();
  FrozenWeights& w = base.weights_;
  KIPP_ASSIGN_OR_RETURN(w.embedding, matrix_from(source.token_embedding));
  KIPP_ASSIGN_OR_RETURN(w.head, matrix_from(source.output));
  KIPP_ASSIGN_OR_RETURN(w.final_norm, gain_from(source.output_norm));
  constexpr TensorView LayerWeights::*kProjections[7] = {
      &LayerWeights::attn_q,   &LayerWeights::attn_k, &LayerWeights::attn_v,  &LayerWeights::attn_output,
      &LayerWeights::ffn_gate, &LayerWeights::ffn_up, &LayerWeights::ffn_down};
  for (const LayerWeights& lw : source.layers) {
    FrozenLayer layer;
    for (size_t p = 0; p < 7; ++p) {
      KIPP_ASSIGN_OR_RETURN(layer.projections[p], matrix_from(lw.*kProjections[p]));
    }
    KIPP_ASSIGN_OR_RETURN(layer.attn_norm, gain_from(lw.attn_norm));
    KIPP_ASSIGN_OR_RETURN(layer.q_norm, gain_from(lw.attn_q_norm));
    KIPP_ASSIGN_OR_RETURN(layer.k_norm, gain_from(lw.attn_k_norm));
    KIPP_ASSIGN_OR_RETURN(layer.ffn_norm, gain_from(lw.ffn_norm));
    w.layers.push_back(std::move(layer));
  }
  const bool tied = w.embedding.data == w.head.data;
  std::vector<Placement> placements;
  auto consider = [&](WeightMatrix& m) {
    if (!is_packed_bf16(*w.kernels, m)) return;
    const uint8_t* data = m.data;
    const size_t row_bytes = m.row_bytes;
    placements.push_back({&m,
                          [data, row_bytes](size_t first, size_t count, uint8_t* out) {
                            std::memcpy(out, data + first * row_bytes, count * row_bytes);
                          },
                          true});
  };
  consider(w.head);
  for (FrozenLayer& layer : w.layers)
    for (WeightMatrix& m : layer.projections) consider(m);
  KIPP_RETURN_IF_ERROR(base.place(placements));
  // The packed head serves the lookups too (the table's dequantize_row reads BF16 panels).
  if (tied) w.embedding = w.head;
  std::vector<const WeightMatrix*> owned;
  for (const Placement& p : placements) owned.push_back(p.target);
  base.count_views(owned);
  return {};
}

// ---- HF folder: every matrix converted to BF16 (round to nearest even) into owned memory.

Expected<RowSource> bf16_rows(const SafetensorsCheckpoint& checkpoint, const std::string& dir, const std::string& name,
                              const std::vector<uint64_t>& shape) {
  const SafetensorsTensor* t = checkpoint.find(name);
  if (!t) return make_error(dir + ": tensor " + name + " is missing");
  if (t->shape != shape) return make_error(dir + ": tensor " + name + " has another shape than the config gives");
  const SafetensorsDtype dtype = t->dtype;
  if (dtype != SafetensorsDtype::F32 && dtype != SafetensorsDtype::BF16 && dtype != SafetensorsDtype::F16) {
    return make_error(dir + ": tensor " + name + " has dtype " + std::string(safetensors_dtype_name(dtype)) +
                      " (expected F32, BF16 or F16)");
  }
  const uint8_t* data = checkpoint.data(name).data();
  const size_t cols = shape.size() == 2 ? shape[1] : shape[0];
  return RowSource([data, dtype, cols](size_t first, size_t count, uint8_t* out) {
    auto* bits = reinterpret_cast<uint16_t*>(out);
    const size_t n = count * cols, begin = first * cols;
    if (dtype == SafetensorsDtype::BF16) {
      std::memcpy(out, data + begin * 2, n * 2);
      return;
    }
    std::vector<float> row(cols);
    std::vector<uint16_t> half(cols);
    for (size_t r = 0; r < count; ++r) {
      if (dtype == SafetensorsDtype::F32) {
        std::memcpy(row.data(), data + (begin + r * cols) * 4, cols * 4);
      } else {
        std::memcpy(half.data(), data + (begin + r * cols) * 2, cols * 2);
        f16_to_f32_row(half.data(), row.data(), cols);
      }
      f32_to_bf16_row(row.data(), bits + r * cols, cols);
    }
  });
}

Expected<std::vector<float>> gain_from(const SafetensorsCheckpoint& checkpoint, const std::string& dir,
                                       const std::string& name, uint64_t width) {
  KIPP_ASSIGN_OR_RETURN(RowSource rows, bf16_rows(checkpoint, dir, name, {width}));
  std::vector<uint16_t> bits(width);
  rows(0, 1, reinterpret_cast<uint8_t*>(bits.data()));
  std::vector<float> values(width);
  bf16_to_f32_row(bits.data(), values.data(), width);
  return values;
}

Status open_hf(StoredBase& base, const std::string& dir) {
  KIPP_ASSIGN_OR_RETURN(std::string config_text, read_text_file(dir + "/config.json"));
  KIPP_ASSIGN_OR_RETURN(ModelConfig source_config, parse_hf_config(config_text));
  KIPP_RETURN_IF_ERROR(check_model_dimensions(base.config_, source_config, dir, false));
  KIPP_ASSIGN_OR_RETURN(SafetensorsCheckpoint checkpoint, SafetensorsCheckpoint::open_dir(dir));
  const ModelConfig& c = base.config_;
  const ParameterLayout layout(source_config);
  FrozenWeights& w = base.weights_;
  w.layers.resize(c.num_layers);
  std::vector<Placement> placements;
  auto matrix = [&](const std::string& name, WeightMatrix& m) -> Status {
    const ParamTensor* t = layout.find(name);
    m = kernels::make_weight_matrix(GgmlType::BF16, nullptr, t->shape[0], t->shape[1]);
    KIPP_ASSIGN_OR_RETURN(RowSource rows, bf16_rows(checkpoint, dir, name, t->shape));
    placements.push_back({&m, std::move(rows), false});
    return {};
  };
  KIPP_RETURN_IF_ERROR(matrix("model.embed_tokens.weight", w.embedding));
  const bool own_head = !c.tie_embeddings && checkpoint.find("lm_head.weight");
  if (own_head) KIPP_RETURN_IF_ERROR(matrix("lm_head.weight", w.head));
  KIPP_ASSIGN_OR_RETURN(w.final_norm, gain_from(checkpoint, dir, "model.norm.weight", c.hidden_size));
  static constexpr const char* kModules[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                              "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                              "mlp.down_proj"};
  for (size_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    FrozenLayer& layer = w.layers[l];
    for (size_t i = 0; i < 7; ++i) {
      KIPP_RETURN_IF_ERROR(matrix(p + kModules[i] + ".weight", layer.projections[i]));
    }
    KIPP_ASSIGN_OR_RETURN(layer.attn_norm, gain_from(checkpoint, dir, p + "input_layernorm.weight", c.hidden_size));
    KIPP_ASSIGN_OR_RETURN(layer.q_norm, gain_from(checkpoint, dir, p + "self_attn.q_norm.weight", c.head_dim));
    KIPP_ASSIGN_OR_RETURN(layer.k_norm, gain_from(checkpoint, dir, p + "self_attn.k_norm.weight", c.head_dim));
    KIPP_ASSIGN_OR_RETURN(layer.ffn_norm,
                          gain_from(checkpoint, dir, p + "post_attention_layernorm.weight", c.hidden_size));
  }
  KIPP_RETURN_IF_ERROR(base.place(placements));
  if (!own_head) w.head = w.embedding;
  std::vector<const WeightMatrix*> owned;
  for (const Placement& p : placements) owned.push_back(p.target);
  base.count_views(owned);
  return {};
}

}  // namespace

Expected<std::unique_ptr<FrozenBase>> FrozenBase::open(const ModelConfig& config, const std::string& source) {
  KIPP_RETURN_IF_ERROR(config.validate());
  auto base = std::make_unique<StoredBase>();
  base->config_ = config;
  base->weights_.kernels = &kernels::cpu_kernels();
  const bool gguf = source.size() > 5 && source.compare(source.size() - 5, 5, ".gguf") == 0;
  if (gguf) {
    KIPP_RETURN_IF_ERROR(open_gguf(*base, source));
  } else if (file_exists(source + "/config.json")) {
    KIPP_RETURN_IF_ERROR(open_hf(*base, source));
  } else {
    return make_error(source + ": not a GGUF file nor a checkpoint folder with config.json");
  }
  return std::unique_ptr<FrozenBase>(std::move(base));
}

}  // namespace kipp::train
