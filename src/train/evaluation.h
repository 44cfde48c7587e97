// `kipp eval`: a model's loss and perplexity on any dataset the trainer reads. The model runs in
// the trainer's FP32 forward pass (GGUF weights are dequantized), so the figure is comparable
// with the validation loss of a training run.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/token_cache.h"
#include "data/training_tokenizer.h"
#include "train/parameters.h"
#include "train/train_config.h"
#include "train/training_model.h"

namespace kipp::train {

// Weights and tokenizer of a checkpoint folder (config.json, model.safetensors, tokenizer.json)
// or a Kipp GGUF; with `adapter_dir`, a PEFT LoRA adapter folder folded into those weights as
// `kipp lora merge` folds it (in float, without the merge's final rounding to the base's dtype).
struct EvalModel {
  ParameterLayout layout;
  std::vector<float> params;
  data::TrainingTokenizer tokenizer;
};
Expected<EvalModel> load_eval_model(const std::string& path, const std::string& adapter_dir = "");

// Only the tokenizer: a tokenizer.json, a checkpoint folder holding one, or a Kipp GGUF.
Expected<data::TrainingTokenizer> load_tokenizer_of(const std::string& path);

struct EvalOptions {
  DataSection data;          // format, text_field, chat_format, ... (data.train = the inputs)
  uint32_t seq_len = 256;    // tokens per window; at most the model's context
  uint32_t batch = 4;        // windows per forward pass
  uint64_t max_windows = 0;  // 0: every window
  uint32_t threads = 0;      // 0: all hardware threads
};

struct EvalResult {
  double loss = 0;  // mean cross-entropy (nats) per counted target
  double perplexity = 0;
  uint64_t windows = 0;
  uint64_t counted = 0;  // targets that carried loss
  data::CacheStats data;
};

struct EvalEvents {
  data::CacheEvents cache;
  std::function<void(uint64_t done, uint64_t total)> on_progress;  // windows
};

// The loss summed over windows [0, count), `batch` at a time: fill(index, inputs, targets)
// writes window `index`'s seq_len inputs and targets. Shared by validation during training.
using WindowFill = std::function<void(uint64_t index, int32_t* inputs, int32_t* targets)>;
Expected<LossSums> evaluate_windows(TrainingModel& model, std::span<const float> params, uint64_t count, uint32_t batch,
                                    uint32_t seq_len, const WindowFill& fill,
                                    const std::function<void(uint64_t done, uint64_t total)>& progress = {});

Expected<EvalResult> evaluate_model(EvalModel& model, const EvalOptions& options, const EvalEvents& events);

}  // namespace kipp::train
