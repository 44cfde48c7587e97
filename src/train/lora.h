// LoRA adapters (low-rank updates W + (alpha / rank) * B A of a frozen base's projections) as one
// flat FP32 buffer, named as PEFT names them, so gradients, AdamW moments and checkpoints treat
// adapters the way ParameterLayout's tensors are treated in a full fine-tune.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/model_config.h"
#include "train/parameters.h"

namespace kipp::train {

// The seven projections of a decoder layer, in the order of the `train.lora.targets` names.
enum class LoraTarget : uint8_t { Q, K, V, O, Gate, Up, Down };
inline constexpr std::array<LoraTarget, 7> kAllLoraTargets = {
    LoraTarget::Q, LoraTarget::K, LoraTarget::V, LoraTarget::O, LoraTarget::Gate, LoraTarget::Up, LoraTarget::Down};

std::string_view lora_target_name(LoraTarget target);           // "q", "k", "v", "o", "gate", "up", "down"
std::string_view lora_module_name(LoraTarget target);           // "self_attn.q_proj" ... "mlp.down_proj"
std::string_view lora_peft_module(LoraTarget target);           // PEFT's target_modules entry: "q_proj" ...
Expected<LoraTarget> parse_lora_target(std::string_view name);  // the short name or the PEFT module name

struct LoraOptions {
  uint32_t rank = 0;  // 0: no adapters (a full fine-tune)
  double alpha = 16.0;
  double dropout = 0.0;  // on each adapter's input, training only
  std::vector<LoraTarget> targets{kAllLoraTargets.begin(), kAllLoraTargets.end()};

  bool enabled() const { return rank > 0; }
  double scale() const { return alpha / double(rank); }
  bool operator==(const LoraOptions&) const = default;
};

// One adapter: A [rank, in] and B [out, rank], offsets in floats into the flat buffer.
struct LoraAdapter {
  uint64_t a = 0;
  uint64_t b = 0;
  uint32_t in = 0;
  uint32_t out = 0;
};

class AdapterLayout {
 public:
  AdapterLayout(const ModelConfig& config, const LoraOptions& options);

  const ModelConfig& config() const { return config_; }
  const LoraOptions& options() const { return options_; }
  // PEFT's names ("base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight"), layer by
  // layer, targets in kAllLoraTargets order, A before B; kind Projection (decayed like weights).
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  uint64_t total() const { return total_; }
  // The adapter on `target` of `layer`, or null when that projection is not a target.
  const LoraAdapter* find(size_t layer, LoraTarget target) const;

 private:
  ModelConfig config_;
  LoraOptions options_;
  std::vector<ParamTensor> tensors_;
  std::vector<std::array<std::optional<LoraAdapter>, kAllLoraTargets.size()>> layers_;
  uint64_t total_ = 0;
};

// PEFT's initialization: A uniform in +-1/sqrt(in) (kaiming_uniform with a = sqrt(5)), drawn from
// counter-based random numbers keyed by (seed, tensor name); B zero, so training starts at the base.
void init_adapters(const AdapterLayout& layout, uint64_t seed, std::span<float> values);

}  // namespace kipp::train
