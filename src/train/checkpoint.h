// Training checkpoints: Hugging-Face-layout folders that `kipp convert` turns into GGUF.
// A LoRA run's checkpoints hold the adapters in PEFT's layout instead of config.json and
// model.safetensors (adapter_config.json, adapter_model.safetensors: see peft_adapter.h), so
// each is an adapter folder `kipp lora merge` takes; the rest is the same.
//
//   RUN_DIR/checkpoints/step-00000200/  config.json  model.safetensors  tokenizer.json
//                                        optimizer.safetensors  trainer_state.json
//   RUN_DIR/latest -> checkpoints/step-00000200      (symlink, replaced atomically)
//   RUN_DIR/best   -> checkpoints/step-00000100      (lowest validation loss)
//
// A checkpoint is written under a temporary folder name, every file fsynced, the folder
// renamed into place and the parent fsynced, and only then do the links move (`best` before
// `latest`): a crash at any point leaves `latest` naming a complete checkpoint.
//
// optimizer.safetensors holds F32 "<parameter name>.exp_avg" and ".exp_avg_sq" for every
// parameter and the metadata "adam_steps". trainer_state.json holds every TrainerState field
// and "version": 1; JSON has no infinity or NaN, so non-finite losses are the strings
// "Infinity", "-Infinity" and "NaN" (which Python's float() reads back).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "train/lora.h"
#include "train/parameters.h"

namespace kipp::train {

struct TrainerState {
  uint64_t step = 0;                   // optimizer updates applied
  uint64_t epoch = 0;                  // data epoch in progress
  uint64_t data_cursor = 0;            // next window within the epoch's shuffled order
  uint64_t tokens_seen = 0;            // training tokens consumed
  uint64_t skipped_steps = 0;          // non-finite steps skipped so far
  uint64_t consecutive_bad_steps = 0;  // of those, how many in a row just before this point
  std::string rng_state;               // the data order's seed and geometry (the trainer's only randomness)
  double best_val_loss = std::numeric_limits<double>::infinity();
  uint64_t best_step = 0;
  double last_val_loss = std::numeric_limits<double>::quiet_NaN();
  double elapsed_seconds = 0;  // wall time of the run so far
};

struct CheckpointData {
  std::span<const float> params;
  std::span<const float> adam_m;  // may be empty (averaged checkpoints have no optimizer)
  std::span<const float> adam_v;
  uint64_t adam_steps = 0;
  TrainerState state;
  std::string tokenizer_json;         // copied verbatim
  std::string tokenizer_config_json;  // may be empty
};

// Writes RUN_DIR/checkpoints/step-NNNNNNNN atomically, points `latest` at it (and `best` when
// is_best), then deletes the oldest step checkpoints beyond keep_last (never the one `best`
// names). Returns the checkpoint folder.
Expected<std::string> save_checkpoint(const std::string& run_dir, const ParameterLayout& layout,
                                      const CheckpointData& data, bool is_best, uint32_t keep_last);
// The same for LoRA adapters (data.params holds adapters.total() floats); `base` is recorded as
// the adapter's base_model_name_or_path.
Expected<std::string> save_checkpoint(const std::string& run_dir, const AdapterLayout& adapters,
                                      const std::string& base, const CheckpointData& data, bool is_best,
                                      uint32_t keep_last);

// Writes a standalone HF-layout folder (config.json, model.safetensors, tokenizer files) with
// no optimizer state: checkpoint averaging and exports use it.
Status write_model_folder(const std::string& dir, const ParameterLayout& layout, std::span<const float> params,
                          const std::string& tokenizer_json, const std::string& tokenizer_config_json);
// tokenizer.json, and tokenizer_config.json when not empty, into `dir`.
Status write_tokenizer_files(const std::string& dir, const std::string& tokenizer_json,
                             const std::string& tokenizer_config_json);

struct LoadedCheckpoint {
  std::vector<float> params, adam_m, adam_v;
  uint64_t adam_steps = 0;
  TrainerState state;
};

// Loads a checkpoint folder written by save_checkpoint for `layout`; config.json must describe
// the same model. The optimizer state must be present and complete.
Expected<LoadedCheckpoint> load_checkpoint(const std::string& dir, const ParameterLayout& layout);
// A LoRA run's checkpoint: the adapters must have `adapters`' options and shapes.
Expected<LoadedCheckpoint> load_checkpoint(const std::string& dir, const AdapterLayout& adapters);

// Only the checkpoint's trainer_state.json (cheap: no weights read).
Expected<TrainerState> load_trainer_state(const std::string& dir);

// Removes what a crash left behind in RUN_DIR/checkpoints: temporary folders, and step folders
// newer than `latest` that no link names (saved, but the links never moved; resume writes
// them again).
Status remove_partial_checkpoints(const std::string& run_dir);

// Creates the folder `out_dir`, which must not exist yet, all at once: `fill` writes the files
// into a temporary sibling that is renamed into place only when it succeeds.
Status write_new_folder(const std::string& out_dir, const std::function<Status(const std::string& dir)>& fill);
// The error write_new_folder gives when `out_dir` exists, for callers that refuse before working.
Status check_new_folder(const std::string& out_dir);

// Element-wise mean of the weights of several checkpoint folders of one model, written as a
// model folder (tokenizer copied from the first).
Status average_checkpoints(const std::vector<std::string>& dirs, const std::string& out_dir);

// config.json text of a Qwen3 model (Qwen3ForCausalLM fields) that parse_hf_config accepts.
std::string hf_config_json(const ModelConfig& config);

}  // namespace kipp::train
