// The training configuration: one YAML file (configs/*.yaml), with `--set section.key=value`
// overrides applied before validation. Unknown sections or keys and bad values are one error
// naming the key ("train.max_steps: expected a positive integer, got 'x'"); when there are
// several, the message has one line per error.
//
// Paths: a relative `tokenizer` or `data.train` entry written in a config file names a file
// next to that file (the config travels with its data); the same key given with --set is
// relative to the working directory, like any path typed on a command line. `run.dir` is an
// output and always follows the working directory. Parsing makes every path absolute, so a
// config saved with to_yaml means the same from any folder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model_config.h"
#include "train/adamw.h"
#include "train/init_source.h"
#include "train/linear_products.h"
#include "train/lora.h"
#include "train/lr_schedule.h"
#include "train/parameters.h"
#include "train/train_device.h"

namespace kipp::train {

struct ModelSection {
  // The model's fields under their training names (ModelConfigField::yaml_key). vocab_size 0
  // ("auto" in YAML) is the tokenizer's vocabulary size; head_dim 0 ("auto") is d_model /
  // n_heads, which parsing resolves. The token ids come from the tokenizer.
  ModelConfig dims{.hidden_size = 768,
                   .num_layers = 12,
                   .num_heads = 12,
                   .num_kv_heads = 4,
                   .ffn_size = 2048,
                   .context_length = 2048,
                   .rope_theta = 10000.0,
                   .rms_norm_eps = 1e-6,
                   .tie_embeddings = true};
  double init_std = 0.02;
  bool scaled_residual_init = false;
  // Accepted only with the values this architecture has (dropout 0.0, activation swiglu,
  // bias false), so a seed config loads and a different value is a clear error.

  bool operator==(const ModelSection&) const = default;
};

struct DataSection {
  // auto (from each file's extension and first record), text, jsonl, csv, parquet, alpaca,
  // sharegpt, openai, or tokens (raw ids).
  std::string format = "auto";
  std::vector<std::string> train;       // files, globs or folders (relative to the config file's folder)
  std::vector<std::string> validation;  // optional held-out files; empty: validation_fraction of train
  std::string text_field = "text";      // JSONL key, CSV column or Parquet column of the document
  std::string document_separator;       // text files: a line equal to it ends a document ("%" for fortunes)
  std::string chat_format = "chatml";   // how conversations are rendered (only assistant tokens carry loss)
  std::string token_dtype = "uint16";   // "tokens" format: uint16 | uint32 little-endian
  double validation_fraction = 0.05;    // of the windows, taken from the end
  uint64_t seed = 1234;                 // shuffle buffer and window order
  uint32_t shuffle_buffer = 10000;      // documents mixed before packing; 0: file order
  std::string cache_dir;                // pre-tokenized cache root; empty: ~/.cache/kipp/datasets
  bool strict = false;                  // a malformed record stops the run instead of being skipped

  bool operator==(const DataSection&) const = default;
};

struct TrainSection {
  uint32_t seq_len = 256;
  uint32_t micro_batch = 8;
  uint32_t grad_accum = 1;
  uint64_t max_steps = 1000;
  ScheduleKind schedule = ScheduleKind::Cosine;
  double lr = 3e-4;
  double min_lr = 3e-5;
  uint64_t warmup_steps = 100;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  bool decay_embeddings = true;
  double grad_clip = 1.0;         // 0: no clipping
  uint64_t seed = 1234;           // parameter init
  uint32_t threads = 0;           // 0: all hardware threads
  bool recompute_blocks = false;  // activation checkpointing
  uint32_t max_bad_steps = 5;     // consecutive non-finite steps before the run stops
  // Under mpirun: start each layer's gradient sum during the backward pass (false: one sum after it).
  bool allreduce_overlap = true;
  // `train.lora`: rank > 0 trains adapters on the frozen --init model instead of every weight.
  LoraOptions lora;
  // The products' operands (their sums are FP32 either way).
  Precision precision = Precision::Fp32;
  // Where the step runs; the GPU's products take BF16 operands with FP32 sums whatever `precision` says.
  TrainDevice device = TrainDevice::Cpu;

  bool operator==(const TrainSection&) const = default;
};

struct EvalSection {
  uint64_t every = 100;                     // steps; 0: never
  uint32_t batches = 8;                     // validation micro-batches per evaluation
  std::vector<std::string> sample_prompts;  // generated from at every evaluation, shown and logged
  uint32_t sample_tokens = 48;              // tokens generated per prompt
  double sample_temperature = 0.8;          // 0: greedy

  bool operator==(const EvalSection&) const = default;
};

struct CheckpointSection {
  uint64_t every = 200;    // steps; 0: only at the end
  uint32_t keep_last = 3;  // step checkpoints kept besides `best`

  bool operator==(const CheckpointSection&) const = default;
};

struct LogSection {
  uint64_t every = 10;  // steps between progress lines

  bool operator==(const LogSection&) const = default;
};

struct TrainConfig {
  ModelSection model;
  std::string tokenizer;  // path to an HF tokenizer.json (relative: against the config file)
  DataSection data;
  TrainSection train;
  EvalSection eval;
  CheckpointSection checkpoint;
  LogSection log;
  std::string run_dir = "runs/run";  // `run.dir`

  // The model dimensions as a ModelConfig (vocab_size must be resolved, i.e. non-zero).
  ModelConfig model_config(uint32_t bos_token_id, uint32_t eos_token_id) const;
  AdamWOptions adamw() const;
  ScheduleOptions schedule() const;
  InitOptions init() const;

  bool operator==(const TrainConfig&) const = default;
};

// Parses YAML text. `overrides` are "section.key=value" strings; the value is parsed as YAML
// (so `--set data.train=[a.txt,b.txt]` works). `base_dir` is the folder relative input paths
// in the text are resolved against ("": the working directory); load_train_config passes the
// file's folder and prefixes errors with the file name.
//
// With `init`, every model key the user leaves out (or sets to `auto`) takes the source's value
// and every model key the user gives must equal it: a difference is one error naming the key,
// both values and the source. `tokenizer`, when not given, is the source's tokenizer.json.
Expected<TrainConfig> parse_train_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                                         const std::string& base_dir, const InitSource* init = nullptr);
Expected<TrainConfig> load_train_config(const std::string& path, const std::vector<std::string>& overrides,
                                        const InitSource* init = nullptr);

// The fully resolved config as YAML (absolute paths), saved in the run folder for --resume.
std::string to_yaml(const TrainConfig& config);

}  // namespace kipp::train
