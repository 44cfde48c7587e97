// The training loop: data windows -> micro-batches -> forward/backward -> clipping -> AdamW,
// with validation, checkpoints and exact resume. Reports progress through callbacks; prints
// nothing itself (the CLI and, later, the dashboard decide how to show it).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "core/gpu_stats.h"
#include "core/status.h"
#include "data/token_cache.h"
#include "train/train_config.h"
#include "train/training_model.h"

namespace kipp::train {

class Collective;

struct TrainRun {
  TrainConfig config;
  // Continue config.run_dir from its `latest` checkpoint: the following steps are bitwise
  // those of an uninterrupted run (same config and thread count).
  bool resume = false;
  // Start from these weights (HF checkpoint folder or GGUF) instead of a random init.
  std::optional<std::string> init_path;
  // Stop after this step with a checkpoint, as if interrupted; the schedule still runs to
  // train.max_steps, so a later --resume continues the same run.
  std::optional<uint64_t> until_step;
  // The processes this run is one rank of (`mpirun -np N`): each step's windows are split
  // between them and their gradients summed; rank 0 alone writes. Null: one process.
  Collective* collective = nullptr;
  // The model of a run whose train.device is cuda: the caller that can see the GPU (the CLI)
  // passes the GPU model's factory, already checked with check_train_device; without one such
  // a run is refused.
  std::function<Expected<std::unique_ptr<TrainingModel>>(const ParameterLayout&, const TrainingModelOptions&)>
      device_model;
  // A GPU run's device figures for metrics.jsonl (RunLogOptions::sample_gpu); empty: none.
  std::function<Expected<GpuSample>()> sample_gpu;
};

struct StepReport {
  uint64_t step = 0;  // updates applied, including this one
  uint64_t max_steps = 0;
  uint64_t epoch = 0;
  double loss = 0;           // this step's mean loss
  double smoothed_loss = 0;  // exponential moving average (0.9)
  double lr = 0;
  double grad_norm = 0;  // before clipping
  double tokens_per_second = 0;
  uint64_t tokens_seen = 0;
  double elapsed_seconds = 0;
  double eta_seconds = 0;
  uint64_t skipped_steps = 0;
  // Data-parallel runs: the ranks, and per step (the mean since the last report) the seconds
  // spent in sums across them, the part of it the step waited for after the backward pass, and
  // the sums' share of the step's time.
  uint32_t ranks = 1;
  double allreduce_seconds = 0;
  double allreduce_wait_seconds = 0;
  double allreduce_share = 0;
};

struct EvalReport {
  uint64_t step = 0;
  double loss = 0;
  double perplexity = 0;
  bool is_best = false;
};

struct SampleReport {
  uint64_t step = 0;
  std::string prompt;
  std::string text;  // the continuation
};

struct TrainEvents {
  std::function<void(const StepReport&)> on_step;  // every log.every steps and the last
  std::function<void(const EvalReport&)> on_eval;
  std::function<void(const std::string&)> on_message;                // data loaded, checkpoint saved, skipped step
  std::function<void(const SampleReport&)> on_sample;                // eval.sample_prompts, at every evaluation
  std::function<void(const data::CacheProgress&)> on_data_progress;  // while the data is tokenized
};

struct TrainSummary {
  uint64_t steps = 0;
  uint64_t tokens_seen = 0;
  double final_loss = std::numeric_limits<double>::quiet_NaN();     // last step run by this call
  double best_val_loss = 0;                                         // infinity when no validation ran
  double last_val_loss = std::numeric_limits<double>::quiet_NaN();  // NaN when no validation ran
  // Validation loss of a context-free unigram model of the training data (what the model must
  // beat to have learnt anything); NaN without validation data.
  double unigram_baseline = std::numeric_limits<double>::quiet_NaN();
  std::string last_checkpoint;  // folder
  bool interrupted = false;     // stopped by the stop flag or until_step
  double elapsed_seconds = 0;
};

// Runs until train.max_steps, until_step, or *stop becomes true (then saves and returns).
Expected<TrainSummary> run_training(const TrainRun& run, const TrainEvents& events, const std::atomic<bool>* stop);

}  // namespace kipp::train
