// LoRA adapters as PEFT saves them, so the ecosystem (PEFT's PeftModel.from_pretrained, vLLM,
// llama.cpp's converter) loads ours and we load theirs:
//
//   DIR/adapter_config.json        PEFT's LoraConfig: peft_type LORA, r, lora_alpha, lora_dropout,
//                                  target_modules (q_proj ... down_proj), base_model_name_or_path ...
//   DIR/adapter_model.safetensors  F32 "base_model.model.model.layers.N.<module>.lora_A.weight"
//                                  [r, in] and ".lora_B.weight" [out, r], no adapter name
//
// Both files are written atomically. Reading accepts what PEFT writes too: tensor names with
// or without the ".default" adapter name, BF16, F16 or F32 values.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model_config.h"
#include "train/lora.h"

namespace kipp::train {

inline constexpr const char* kAdapterConfigFile = "adapter_config.json";
inline constexpr const char* kAdapterModelFile = "adapter_model.safetensors";

// Writes `values` (layout.total() floats) into `dir` (created when missing). `base_model` is
// recorded as base_model_name_or_path: where the frozen base was read from.
Status save_peft_adapter(const std::string& dir, const AdapterLayout& layout, std::span<const float> values,
                         const std::string& base_model);

struct PeftAdapter {
  LoraOptions options;        // r, lora_alpha, lora_dropout, target_modules
  std::string base_model;     // base_model_name_or_path ("" when null)
  std::vector<float> values;  // in AdapterLayout(config, options) order
};

// Reads the adapter folder `dir` for a base of `config`: every adapter tensor must be present
// with the shape the base gives it. Options PEFT has but a plain LoRA update does not honour
// (rslora, DoRA, fan_in_fan_out, biases, modules_to_save, per-module ranks) are refused by name.
Expected<PeftAdapter> load_peft_adapter(const std::string& dir, const ModelConfig& config);

}  // namespace kipp::train
