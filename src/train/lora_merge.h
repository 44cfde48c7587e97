// `kipp lora merge`: a LoRA adapter folded into its base, written as a Hugging Face checkpoint
// folder that `kipp convert` turns into a GGUF. Every targeted projection becomes
// W = W0 + (alpha / r) B A, computed from the dequantized base with the product summed in double,
// rounded to float and then once to the output dtype (round to nearest even); every other tensor
// is the base's, unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "core/status.h"
#include "train/init_source.h"
#include "train/parameters.h"
#include "train/peft_adapter.h"

namespace kipp::train {

struct MergeOptions {
  // A folder holding tokenizer.json (and tokenizer_config.json ...) when neither the base nor the
  // adapter folder has one (a GGUF base keeps its vocabulary as metadata).
  std::string tokenizer_dir;
  std::function<void(const std::string&)> on_progress;  // one line per stage and per layer
};

struct MergeSummary {
  uint64_t merged_tensors = 0;
  std::string dtype;   // of model.safetensors: the HF base's ("BF16", "F16", "F32"), BF16 for a GGUF
  uint64_t bytes = 0;  // of model.safetensors
};

// Folds `adapter` into `values` (the base's parameters in `layout` order): every targeted
// projection becomes W0 + (alpha / r) B A as described above, in float. Returns the number of
// projections changed; `on_layer` (may be empty) hears each layer done.
uint64_t fold_lora(const ParameterLayout& layout, const PeftAdapter& adapter, std::span<float> values,
                   const std::function<void(size_t layer)>& on_layer = {});

// Writes `out_dir` (which must not exist): config.json (the base's), model.safetensors and the
// tokenizer files of the base folder, else of the adapter folder, else of options.tokenizer_dir.
// The adapter must have been made for the base's shapes; a mismatch names the tensor.
Expected<MergeSummary> merge_lora(const InitSource& base, const std::string& adapter_dir, const std::string& out_dir,
                                  const MergeOptions& options);

}  // namespace kipp::train
