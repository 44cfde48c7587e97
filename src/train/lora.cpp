#include "train/lora.h"

#include <cmath>
#include <string>

#include "core/random.h"
#include "xxhash.h"

namespace kipp::train {
namespace {

struct TargetNames {
  std::string_view short_name, module, peft;
};

constexpr std::array<TargetNames, kAllLoraTargets.size()> kTargetNames = {{
    {"q", "self_attn.q_proj", "q_proj"},
    {"k", "self_attn.k_proj", "k_proj"},
    {"v", "self_attn.v_proj", "v_proj"},
    {"o", "self_attn.o_proj", "o_proj"},
    {"gate", "mlp.gate_proj", "gate_proj"},
    {"up", "mlp.up_proj", "up_proj"},
    {"down", "mlp.down_proj", "down_proj"},
}};

const TargetNames& names(LoraTarget target) { return kTargetNames[size_t(target)]; }

// [out, in] of a projection.
std::pair<uint32_t, uint32_t> projection_shape(const ModelConfig& c, LoraTarget target) {
  const auto q_width = uint32_t(c.q_width()), kv_width = uint32_t(c.kv_width());
  switch (target) {
    case LoraTarget::Q: return {q_width, c.hidden_size};
    case LoraTarget::K:
    case LoraTarget::V: return {kv_width, c.hidden_size};
    case LoraTarget::O: return {c.hidden_size, q_width};
    case LoraTarget::Gate:
    case LoraTarget::Up: return {c.ffn_size, c.hidden_size};
    case LoraTarget::Down: return {c.hidden_size, c.ffn_size};
  }
  return {0, 0};
}

}  // namespace

std::string_view lora_target_name(LoraTarget target) { return names(target).short_name; }
std::string_view lora_module_name(LoraTarget target) { return names(target).module; }
std::string_view lora_peft_module(LoraTarget target) { return names(target).peft; }

Expected<LoraTarget> parse_lora_target(std::string_view name) {
  for (LoraTarget target : kAllLoraTargets) {
    if (name == names(target).short_name || name == names(target).peft) return target;
  }
  return make_error("'" + std::string(name) + "' is not a LoRA target (q, k, v, o, gate, up, down)");
}

AdapterLayout::AdapterLayout(const ModelConfig& config, const LoraOptions& options)
    : config_(config), options_(options), layers_(config.num_layers) {
  if (!options.enabled()) return;
  for (size_t layer = 0; layer < config.num_layers; ++layer) {
    for (LoraTarget target : kAllLoraTargets) {
      bool chosen = false;
      for (LoraTarget t : options.targets) chosen = chosen || t == target;
      if (!chosen) continue;
      const auto [out, in] = projection_shape(config, target);
      const std::string prefix =
          "base_model.model.model.layers." + std::to_string(layer) + "." + std::string(names(target).module);
      LoraAdapter adapter{.a = total_, .b = total_ + uint64_t{options.rank} * in, .in = in, .out = out};
      tensors_.push_back({prefix + ".lora_A.weight",
                          {options.rank, in},
                          adapter.a,
                          uint64_t{options.rank} * in,
                          ParamKind::Projection});
      tensors_.push_back({prefix + ".lora_B.weight",
                          {out, options.rank},
                          adapter.b,
                          uint64_t{out} * options.rank,
                          ParamKind::Projection});
      total_ = adapter.b + uint64_t{out} * options.rank;
      layers_[layer][size_t(target)] = adapter;
    }
  }
}

const LoraAdapter* AdapterLayout::find(size_t layer, LoraTarget target) const {
  if (layer >= layers_.size() || !layers_[layer][size_t(target)]) return nullptr;
  return &*layers_[layer][size_t(target)];
}

void init_adapters(const AdapterLayout& layout, uint64_t seed, std::span<float> values) {
  for (const ParamTensor& t : layout.tensors()) {
    float* out = values.data() + t.offset;
    if (t.name.ends_with(".lora_B.weight")) {
      std::fill(out, out + t.count, 0.0f);
      continue;
    }
    const double bound = 1.0 / std::sqrt(double(t.shape[1]));
    const uint64_t key = XXH3_64bits_withSeed(t.name.data(), t.name.size(), seed);
    for (uint64_t i = 0; i < t.count; ++i) out[i] = float((2.0 * uniform_open(counter_random(key, i)) - 1.0) * bound);
  }
}

}  // namespace kipp::train
