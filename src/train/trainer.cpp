#include "train/trainer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <cblas.h>

#include "core/files.h"
#include "core/random.h"
#include "data/packed_dataset.h"
#include "data/training_tokenizer.h"
#include "kernels/cpu/kernels.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/collective.h"
#include "train/device_optimizer.h"
#include "train/evaluation.h"
#include "train/frozen_base.h"
#include "train/lora.h"
#include "train/loss_plot.h"
#include "train/lr_schedule.h"
#include "train/parameters.h"
#include "train/peft_adapter.h"
#include "train/run_log.h"
#include "train/samples.h"
#include "train/train_device.h"
#include "train/training_data.h"
#include "train/training_model.h"
#include "xxhash.h"

namespace kipp::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

static_assert(data::kNoTarget == kIgnoreTarget);

// The window order is a pure function of (seed, epoch), so the "RNG state" a checkpoint needs is
// that seed plus what gives the saved data position its meaning (the cached data and the window
// geometry); resume refuses a run where any of them differ.
std::string rng_state_text(uint64_t data_seed, const data::PackedDataset& dataset) {
  return "window_order seed=" + std::to_string(data_seed) + " train_windows=" + std::to_string(dataset.train_count()) +
         " seq_len=" + std::to_string(dataset.seq_len()) + " tokens=" + dataset.train_cache().content_hash();
}

void tell(const TrainEvents& events, const std::string& message) {
  if (events.on_message) events.on_message(message);
}

// What the run trains: every weight of `model`, or (LoRA) the adapters on a frozen base, whose
// weights only the TrainingModel reads.
struct Trained {
  const ParameterLayout& model;
  const AdapterLayout* adapters = nullptr;
  std::string base;  // LoRA: where the frozen base was read from

  std::span<const ParamTensor> tensors() const {
    return adapters ? std::span<const ParamTensor>(adapters->tensors()) : model.tensors();
  }
  uint64_t total() const { return adapters ? adapters->total() : model.total(); }
};

// The training state that moves: weights, gradients, optimizer and the data position.
class Loop {
 public:
  // `log` is null on every rank but 0, which alone writes.
  Loop(const TrainRun& run, const TrainEvents& events, const Trained& trained, data::PackedDataset dataset,
       std::unique_ptr<TrainingModel> model, data::TrainingTokenizer tokenizer, double unigram_baseline,
       Collective& collective, RunLog* log)
      : run_(run),
        config_(run.config),
        events_(events),
        trained_(trained),
        dataset_(std::move(dataset)),
        model_(std::move(model)),
        tokenizer_(std::move(tokenizer)),
        params_(trained.total()),
        grads_(trained.total()),
        optimizer_(trained.tensors(), config_.adamw()),
        unigram_baseline_(unigram_baseline),
        collective_(collective),
        log_(log) {
    device_ = model_->device_optimizer();
    if (device_) grads_ = {};  // the gradient lives on the device
    const size_t rows = size_t(config_.train.micro_batch) * config_.train.grad_accum * config_.train.seq_len;
    inputs_.resize(rows);
    targets_.resize(rows);
  }

  Status start_fresh() {
    if (trained_.adapters) {
      // The --init model is the frozen base the TrainingModel holds; only adapters start here.
      init_adapters(*trained_.adapters, config_.train.seed, params_);
    } else if (run_.init_path) {
      KIPP_RETURN_IF_ERROR(load_parameters(trained_.model, *run_.init_path, params_));
      tell(events_, "initialized from " + *run_.init_path);
    } else {
      init_parameters(trained_.model, config_.init(), params_);
    }
    state_.rng_state = rng_state_text(config_.data.seed, dataset_);
    return {};
  }

  Status resume_from(const std::string& dir) {
    KIPP_ASSIGN_OR_RETURN(LoadedCheckpoint loaded, trained_.adapters ? load_checkpoint(dir, *trained_.adapters)
                                                                     : load_checkpoint(dir, trained_.model));
    const std::string expected = rng_state_text(config_.data.seed, dataset_);
    if (loaded.state.rng_state != expected) {
      return make_error(dir + ": the run's data order (" + loaded.state.rng_state +
                        ") differs from what the corpus and "
                        "config give now (" +
                        expected +
                        "): the data files, data.seed, data.validation_fraction, the "
                        "data format options and train.seq_len must stay as they were for the saved data position "
                        "to mean the same");
    }
    params_ = std::move(loaded.params);
    std::copy(loaded.adam_m.begin(), loaded.adam_m.end(), optimizer_.first_moment().begin());
    std::copy(loaded.adam_v.begin(), loaded.adam_v.end(), optimizer_.second_moment().begin());
    optimizer_.set_steps_taken(loaded.adam_steps);
    state_ = loaded.state;
    tell(events_, "resumed from " + dir + " at step " + std::to_string(state_.step));
    return {};
  }

  Expected<TrainSummary> run(const std::atomic<bool>* stop) {
    const TrainSection& t = config_.train;
    const ScheduleOptions schedule = config_.schedule();
    started_ = Clock::now();
    elapsed_before_ = state_.elapsed_seconds;
    first_step_ = state_.step;
    const uint64_t last_step = std::min<uint64_t>(t.max_steps, run_.until_step.value_or(t.max_steps));
    TrainSummary summary;
    summary.best_val_loss = state_.best_val_loss;
    double smoothed = std::numeric_limits<double>::quiet_NaN();
    window_clock_ = Clock::now();
    window_tokens_ = 0;
    bool saved_current = first_step_ > 0;
    if (device_) KIPP_RETURN_IF_ERROR(device_->load(params_, optimizer_));

    while (state_.step < last_step) {
      KIPP_ASSIGN_OR_RETURN(const bool stopping, any_rank_stopping(stop));
      if (stopping) {
        summary.interrupted = true;
        break;
      }
      KIPP_ASSIGN_OR_RETURN(const StepLoss step_loss, accumulate_gradients());
      const uint64_t counted = step_loss.counted;
      const double loss = counted ? step_loss.loss_sum / double(counted) : 0.0;
      double norm = 0.0;
      if (counted) {
        KIPP_ASSIGN_OR_RETURN(norm, clip_gradients());
      }
      // A step with nothing to learn (every target masked) or a non-finite loss or gradient is
      // skipped with the optimizer untouched (no decay, no momentum, no step count).
      const char* skip_reason = counted == 0           ? "no target carries loss"
                                : !std::isfinite(loss) ? "non-finite loss"
                                : !std::isfinite(norm) ? "non-finite gradient"
                                                       : nullptr;
      if (skip_reason) {
        KIPP_RETURN_IF_ERROR(skip_step(skip_reason, counted > 0));
        continue;
      }
      state_.consecutive_bad_steps = 0;
      const double lr = learning_rate(schedule, state_.step);
      KIPP_RETURN_IF_ERROR(optimizer_step(lr));
      ++state_.step;
      saved_current = false;
      smoothed = std::isnan(smoothed) ? loss : 0.9 * smoothed + 0.1 * loss;
      summary.final_loss = loss;

      // The schedule's end (not --until-step) evaluates, so a stopped and resumed run
      // evaluates at exactly the steps an uninterrupted one does.
      const bool end_of_schedule = state_.step == t.max_steps;
      const bool last = state_.step == last_step;
      if (state_.step % config_.log.every == 0 || last) KIPP_RETURN_IF_ERROR(report_step(loss, smoothed, lr, norm));
      bool is_best = false;
      if (config_.eval.every && dataset_.validation_count() &&
          (state_.step % config_.eval.every == 0 || end_of_schedule)) {
        KIPP_ASSIGN_OR_RETURN(is_best, evaluate());
      }
      // A new best is saved at once, so `best` always names the lowest validation loss seen.
      if ((config_.checkpoint.every && state_.step % config_.checkpoint.every == 0) || last || is_best) {
        state_.elapsed_seconds = elapsed();
        KIPP_RETURN_IF_ERROR(save(is_best));
        saved_current = true;
      }
    }
    if (!saved_current && state_.step > first_step_) {
      state_.elapsed_seconds = elapsed();
      KIPP_RETURN_IF_ERROR(save(false));
    }
    if (trained_.adapters && log_) KIPP_RETURN_IF_ERROR(write_final_adapter());
    summary.interrupted = summary.interrupted || state_.step < t.max_steps;
    summary.steps = state_.step;
    summary.tokens_seen = state_.tokens_seen;
    summary.best_val_loss = state_.best_val_loss;
    summary.last_val_loss = state_.last_val_loss;
    summary.unigram_baseline = unigram_baseline_;
    summary.last_checkpoint = last_checkpoint_;
    summary.elapsed_seconds = elapsed();
    return summary;
  }

 private:
  // What one optimizer step's micro-batches gave: the targets that carry loss, and their loss.
  struct StepLoss {
    uint64_t counted = 0;
    double loss_sum = 0;
  };

  double elapsed() const { return elapsed_before_ + std::chrono::duration<double>(Clock::now() - started_).count(); }

  // This rank's grad_accum micro-batches of the step forward and backward: the gradient of the
  // step's mean loss over every rank's windows, summed across ranks, in grads_ on every rank.
  Expected<StepLoss> accumulate_gradients() {
    const TrainSection& t = config_.train;
    if (device_) {
      KIPP_RETURN_IF_ERROR(device_->clear_gradients());
    } else {
      std::fill(grads_.begin(), grads_.end(), 0.0f);
    }
    const uint32_t micro_rows = t.micro_batch * t.seq_len;
    fill_step();
    StepLoss out;
    for (int32_t target : targets_) out.counted += target != kIgnoreTarget;
    // Every rank scales by the whole step's count, so the summed gradient is the step's mean.
    double counted = double(out.counted);
    KIPP_RETURN_IF_ERROR(sum_across_ranks(std::span<double>(&counted, 1)));
    out.counted = uint64_t(counted);
    const uint64_t step_micro_batches = uint64_t(t.grad_accum) * uint64_t(collective_.size());
    const uint64_t first_micro_batch = uint64_t(t.grad_accum) * uint64_t(collective_.rank());
    for (uint32_t m = 0; m < t.grad_accum && out.counted > 0; ++m) {
      TokenBatch batch;
      batch.inputs = std::span<const int32_t>(inputs_).subspan(size_t(m) * micro_rows, micro_rows);
      batch.targets = std::span<const int32_t>(targets_).subspan(size_t(m) * micro_rows, micro_rows);
      batch.batch = t.micro_batch;
      batch.seq_len = t.seq_len;
      // Dropout masks keyed by the step and the micro-batch's place among all ranks' micro-batches,
      // so a resumed run, and one process with the same global batch, draw the same ones.
      batch.noise_key = counter_random(t.seed, state_.step * step_micro_batches + first_micro_batch + m);
      if (m + 1 == t.grad_accum) begin_gradient_sums();
      const float grad_scale = 1.0f / float(out.counted);
      KIPP_ASSIGN_OR_RETURN(LossSums sums, device_ ? device_->accumulate(batch, grad_scale)
                                                   : model_->forward_backward(params_, batch, grad_scale, grads_));
      out.loss_sum += sums.loss_sum;
    }
    if (out.counted > 0) {
      KIPP_RETURN_IF_ERROR(finish_gradient_sums());
      KIPP_RETURN_IF_ERROR(sum_across_ranks(std::span<double>(&out.loss_sum, 1)));
    }
    const uint64_t step_tokens = step_micro_batches * micro_rows;
    state_.tokens_seen += step_tokens;
    window_tokens_ += step_tokens;
    ++window_steps_;
    return out;
  }

  // The step's gradient norm before clipping, the gradient clipped (clip_gradient_norm's rule).
  Expected<double> clip_gradients() {
    if (!device_) return clip_gradient_norm(grads_, config_.train.grad_clip);
    KIPP_ASSIGN_OR_RETURN(const double norm, device_->gradient_norm());
    const double factor = clip_factor(norm, config_.train.grad_clip);
    if (factor < 1.0) KIPP_RETURN_IF_ERROR(device_->scale_gradients(float(factor)));
    return norm;
  }

  // One AdamW update; on the device, the host copies are stale until refresh_host().
  Status optimizer_step(double lr) {
    if (!device_) {
      optimizer_.step(params_, grads_, lr);
      return {};
    }
    KIPP_RETURN_IF_ERROR(device_->step(lr, optimizer_.steps_taken() + 1));
    optimizer_.set_steps_taken(optimizer_.steps_taken() + 1);
    host_stale_ = true;
    return {};
  }

  // The device's parameters and moments into params_ and optimizer_, before the host reads them.
  Status refresh_host() {
    if (!host_stale_) return {};
    KIPP_RETURN_IF_ERROR(device_->store(params_, optimizer_));
    host_stale_ = false;
    return {};
  }

  // The step's windows of all ranks, in window order: rank r's micro-batches are the r-th
  // grad_accum of them, so N ranks with grad_accum G read what one process reads with grad_accum
  // N x G. Every rank moves the data position past all of them, so it counts windows of the
  // whole run, whatever the rank count.
  void fill_step() {
    const TrainSection& t = config_.train;
    const uint64_t per_rank = uint64_t(t.grad_accum) * t.micro_batch;
    const uint64_t first = per_rank * uint64_t(collective_.rank());
    const uint64_t total = per_rank * uint64_t(collective_.size());
    for (uint64_t k = 0; k < total; ++k) {
      if (state_.data_cursor >= dataset_.train_count()) {
        ++state_.epoch;
        state_.data_cursor = 0;
      }
      const uint64_t window = state_.data_cursor++;
      if (k < first || k >= first + per_rank) continue;
      if (order_.epoch != state_.epoch || !order_.order) {
        order_.order.emplace(dataset_.train_count(), config_.data.seed, state_.epoch);
        order_.epoch = state_.epoch;
      }
      const size_t offset = size_t(k - first) * t.seq_len;
      dataset_.fill_train((*order_.order)[window], inputs_.data() + offset, targets_.data() + offset);
    }
  }

  // Gradient sums across ranks: with train.allreduce_overlap each layer's slice starts as soon as
  // the last micro-batch's backward has finished it; the rest after the backward pass.
  void begin_gradient_sums() {
    sent_.clear();
    if (collective_.size() == 1 || !config_.train.allreduce_overlap) return;
    model_->set_gradients_ready([this](uint64_t offset, uint64_t count) {
      sent_.push_back({offset, count});
      if (!sums_status_) return;
      const auto began = Clock::now();
      sums_status_ = collective_.start_sum(std::span<float>(grads_).subspan(offset, count));
      // Open MPI advances a nonblocking sum only inside MPI calls: each layer gives it one.
      if (sums_status_) sums_status_ = collective_.progress();
      window_allreduce_ += seconds_since(began);
    });
  }

  // The slices not started during the backward pass, then the wait for all of them: the time
  // the step spends after its backward pass on the sums.
  Status finish_gradient_sums() {
    if (collective_.size() == 1) return {};
    model_->set_gradients_ready({});
    KIPP_RETURN_IF_ERROR(std::exchange(sums_status_, Status{}));
    const auto began = Clock::now();
    std::sort(sent_.begin(), sent_.end(),
              [](const BufferSlice& a, const BufferSlice& b) { return a.offset < b.offset; });
    uint64_t at = 0;
    sent_.push_back({grads_.size(), 0});
    for (const BufferSlice& slice : sent_) {
      if (slice.offset > at) {
        KIPP_RETURN_IF_ERROR(collective_.start_sum(std::span<float>(grads_).subspan(at, slice.offset - at)));
      }
      at = slice.offset + slice.count;
    }
    KIPP_RETURN_IF_ERROR(collective_.wait_all());
    const double seconds = seconds_since(began);
    window_allreduce_ += seconds;
    window_allreduce_wait_ += seconds;
    return {};
  }

  // Blocking sums of a few numbers (target counts, losses) across ranks.
  Status sum_across_ranks(std::span<double> values) {
    if (collective_.size() == 1) return {};
    const auto began = Clock::now();
    KIPP_RETURN_IF_ERROR(collective_.sum(values));
    window_allreduce_ += seconds_since(began);
    return {};
  }

  // Whether any rank was asked to stop (mpirun forwards Ctrl-C and SIGTERM to every rank, which
  // may see it a step apart): all ranks stop after the same step.
  Expected<bool> any_rank_stopping(const std::atomic<bool>* stop) {
    double stopping = stop && stop->load() ? 1.0 : 0.0;
    KIPP_RETURN_IF_ERROR(sum_across_ranks(std::span<double>(&stopping, 1)));
    return stopping > 0;
  }

  static double seconds_since(Clock::time_point began) {
    return std::chrono::duration<double>(Clock::now() - began).count();
  }

  // A skipped step is counted; too many in a row end the run.
  Status skip_step(const char* skip_reason, bool any_counted) {
    ++state_.skipped_steps;
    const uint64_t consecutive_bad = ++state_.consecutive_bad_steps;
    tell(events_, "step " + std::to_string(state_.step + 1) + ": " + skip_reason + ", skipped (" +
                      std::to_string(state_.skipped_steps) + " skipped so far)");
    if (consecutive_bad >= config_.train.max_bad_steps) {
      return make_error(std::to_string(consecutive_bad) + " consecutive steps were skipped (the last: " + skip_reason +
                        "); stopping" +
                        (any_counted ? " (lower train.lr or set train.grad_clip)" : " (check the data's loss masks)") +
                        ". The last good checkpoint is " + last_good_checkpoint());
    }
    return {};
  }

  // The step's line in the run log and to the caller; the throughput window starts anew.
  Status report_step(double loss, double smoothed, double lr, double norm) {
    const uint64_t max_steps = config_.train.max_steps;
    const double window_seconds = std::chrono::duration<double>(Clock::now() - window_clock_).count();
    StepReport report;
    report.step = state_.step;
    report.max_steps = max_steps;
    report.epoch = state_.epoch;
    report.loss = loss;
    report.smoothed_loss = smoothed;
    report.lr = lr;
    report.grad_norm = norm;
    report.tokens_per_second = window_seconds > 0 ? double(window_tokens_) / window_seconds : 0;
    report.tokens_seen = state_.tokens_seen;
    report.elapsed_seconds = elapsed();
    const double per_step = (report.elapsed_seconds - elapsed_before_) / double(state_.step - first_step_);
    report.eta_seconds = per_step * double(max_steps - state_.step);
    report.skipped_steps = state_.skipped_steps;
    report.ranks = uint32_t(collective_.size());
    if (window_steps_ > 0) {
      report.allreduce_seconds = window_allreduce_ / double(window_steps_);
      report.allreduce_wait_seconds = window_allreduce_wait_ / double(window_steps_);
    }
    report.allreduce_share = window_seconds > 0 ? window_allreduce_ / window_seconds : 0;
    if (log_) KIPP_RETURN_IF_ERROR(log_->record_step(report));
    if (events_.on_step) events_.on_step(report);
    window_clock_ = Clock::now();
    window_tokens_ = 0;
    window_steps_ = 0;
    window_allreduce_ = window_allreduce_wait_ = 0;
    return {};
  }

  // Mean loss over the first eval.batches micro-batches of validation windows (a fixed set, so
  // evaluations are comparable across steps).
  Expected<bool> evaluate() {
    KIPP_RETURN_IF_ERROR(refresh_host());
    const uint64_t windows =
        std::min<uint64_t>(dataset_.validation_count(), uint64_t(config_.eval.batches) * config_.train.micro_batch);
    auto fill = [&](uint64_t index, int32_t* inputs, int32_t* targets) {
      dataset_.fill_validation(index, inputs, targets);
    };
    KIPP_ASSIGN_OR_RETURN(LossSums sums, evaluate_windows(*model_, params_, windows, config_.train.micro_batch,
                                                          config_.train.seq_len, fill));
    const double loss_sum = sums.loss_sum;
    const uint64_t counted = sums.counted;
    const double loss = counted ? loss_sum / double(counted) : std::numeric_limits<double>::quiet_NaN();
    const bool is_best = std::isfinite(loss) && loss < state_.best_val_loss;
    state_.last_val_loss = loss;
    if (is_best) {
      state_.best_val_loss = loss;
      state_.best_step = state_.step;
    }
    EvalReport report;
    report.step = state_.step;
    report.loss = loss;
    report.perplexity = std::exp(loss);
    report.is_best = is_best;
    if (!log_) return is_best;  // samples are for the log and the dashboard only
    KIPP_RETURN_IF_ERROR(log_->record_eval(report));
    if (events_.on_eval) events_.on_eval(report);
    KIPP_RETURN_IF_ERROR(draw_samples());
    return is_best;
  }

  Status draw_samples() {
    SampleOptions options;
    options.model_vocab_size = trained_.model.config().vocab_size;
    options.max_tokens = config_.eval.sample_tokens;
    options.max_length = config_.train.seq_len;
    options.temperature = config_.eval.sample_temperature;
    for (size_t i = 0; i < config_.eval.sample_prompts.size(); ++i) {
      options.seed = counter_random(config_.train.seed, state_.step * 1000 + i);
      const std::string& prompt = config_.eval.sample_prompts[i];
      KIPP_ASSIGN_OR_RETURN(std::string text, generate_sample(*model_, params_, tokenizer_, prompt, options));
      KIPP_RETURN_IF_ERROR(log_->record_sample(state_.step, prompt, text));
      if (events_.on_sample) events_.on_sample(SampleReport{state_.step, prompt, std::move(text)});
    }
    return {};
  }

  Status save(bool is_best) {
    if (!log_) return {};
    KIPP_RETURN_IF_ERROR(refresh_host());
    const auto began = Clock::now();
    CheckpointData data;
    data.params = params_;
    data.adam_m = optimizer_.first_moment();
    data.adam_v = optimizer_.second_moment();
    data.adam_steps = optimizer_.steps_taken();
    data.state = state_;
    data.tokenizer_json = tokenizer_.tokenizer_json;
    data.tokenizer_config_json = tokenizer_.tokenizer_config_json;
    const uint32_t keep = config_.checkpoint.keep_last;
    KIPP_ASSIGN_OR_RETURN(last_checkpoint_,
                          trained_.adapters
                              ? save_checkpoint(config_.run_dir, *trained_.adapters, trained_.base, data, is_best, keep)
                              : save_checkpoint(config_.run_dir, trained_.model, data, is_best, keep));
    const double seconds = std::chrono::duration<double>(Clock::now() - began).count();
    char line[96];
    std::snprintf(line, sizeof line, " (%.1f MB in %.2f s)%s", double(trained_.total()) * 12 / 1e6, seconds,
                  is_best ? ", best so far" : "");
    tell(events_, "step " + std::to_string(state_.step) + ": checkpoint saved to " + last_checkpoint_ + line);
    return {};
  }

  // RUN_DIR/adapter: the run's adapters as they are now, a PEFT folder with the tokenizer.
  Status write_final_adapter() {
    KIPP_RETURN_IF_ERROR(refresh_host());
    const std::string dir = config_.run_dir + "/adapter";
    KIPP_RETURN_IF_ERROR(save_peft_adapter(dir, *trained_.adapters, params_, trained_.base));
    KIPP_RETURN_IF_ERROR(write_tokenizer_files(dir, tokenizer_.tokenizer_json, tokenizer_.tokenizer_config_json));
    tell(events_, "adapter (step " + std::to_string(state_.step) + ") written to " + dir +
                      "; merge it with: kipp lora merge " + trained_.base + " " + dir + " -o MERGED_DIR");
    return {};
  }

  std::string last_good_checkpoint() const {
    if (!last_checkpoint_.empty()) return last_checkpoint_;
    std::error_code error;
    const fs::path latest = fs::canonical(config_.run_dir + "/latest", error);
    return error ? "none (no checkpoint was saved before)" : latest.string();
  }

  const TrainRun& run_;
  const TrainConfig& config_;
  const TrainEvents& events_;
  const Trained& trained_;
  data::PackedDataset dataset_;
  std::unique_ptr<TrainingModel> model_;
  // The model's optimizer step on its device, or null (the host applies AdamW to params_).
  DeviceOptimizer* device_ = nullptr;
  // Whether the device has taken steps that params_ and optimizer_'s moments do not hold yet.
  bool host_stale_ = false;
  data::TrainingTokenizer tokenizer_;
  std::vector<float> params_, grads_;
  AdamW optimizer_;
  TrainerState state_;
  std::vector<int32_t> inputs_, targets_;
  struct {
    std::optional<data::WindowOrder> order;
    uint64_t epoch = 0;
  } order_;
  std::string last_checkpoint_;
  double unigram_baseline_;
  Collective& collective_;
  RunLog* log_;
  // Gradient slices whose sums began during the backward pass, and the first failure to begin one.
  std::vector<BufferSlice> sent_;
  Status sums_status_;
  // The current run() call: its start, the time and step resumed at, the throughput window.
  Clock::time_point started_;
  double elapsed_before_ = 0;
  uint64_t first_step_ = 0;
  Clock::time_point window_clock_;
  uint64_t window_tokens_ = 0;
  // Steps since the report and the seconds their sums across ranks took (the wait: after backward).
  uint64_t window_steps_ = 0;
  double window_allreduce_ = 0, window_allreduce_wait_ = 0;
};

// A new run needs an empty run.dir, a resumed one a complete checkpoint behind 'latest'.
Status check_run_dir(const TrainRun& run, const std::string& latest) {
  const TrainConfig& config = run.config;
  const bool has_run = fs::exists(fs::symlink_status(latest));
  if (run.resume && !has_run) return make_error(config.run_dir + ": no checkpoint to resume (no 'latest')");
  std::error_code link_error;
  if (run.resume && !fs::exists(latest, link_error)) {
    return make_error(latest + " points at " + fs::read_symlink(latest, link_error).string() +
                      ", which does not exist; point it at a complete checkpoint folder to resume");
  }
  if (!run.resume && has_run) {
    return make_error("run.dir " + config.run_dir + " already holds a run; continue it with --resume " +
                      config.run_dir + " or choose another run.dir");
  }
  if (run.resume && run.init_path) return make_error("--init starts a new run; it cannot be combined with --resume");
  const LoraOptions& lora = config.train.lora;
  if (lora.enabled() && !run.resume && !run.init_path) {
    return make_error("train.lora.rank is " + std::to_string(lora.rank) +
                      ": LoRA trains adapters on a frozen base model; give the base with --init SOURCE (a registry "
                      "name such as Qwen/Qwen3-0.6B, an HF checkpoint folder or a GGUF)");
  }
  return {};
}

// The config with model.vocab_size taken from the tokenizer when unset.
Expected<TrainConfig> resolve_vocab_size(const TrainConfig& config, const data::TrainingTokenizer& tokenizer) {
  TrainConfig resolved = config;
  if (resolved.model.dims.vocab_size == 0) resolved.model.dims.vocab_size = tokenizer.vocab_size;
  if (resolved.model.dims.vocab_size < tokenizer.vocab_size) {
    return make_error("model.vocab_size " + std::to_string(resolved.model.dims.vocab_size) +
                      " is smaller than the tokenizer's " + std::to_string(tokenizer.vocab_size) + " ids");
  }
  return resolved;
}

void tell_data(const TrainEvents& events, const data::PackedDataset& dataset, uint32_t seq_len, const Trained& trained,
               int threads) {
  const data::CacheStats& stats = dataset.train_cache().stats();
  tell(events, "data: " + std::to_string(stats.records) + " records (" + std::to_string(stats.malformed) +
                   " malformed, " + std::to_string(stats.all_masked) + " without assistant tokens, skipped), " +
                   std::to_string(stats.tokens) + " tokens (" + std::to_string(stats.counted) + " carry loss), " +
                   std::to_string(dataset.train_count()) + " training and " +
                   std::to_string(dataset.validation_count()) + " validation windows of " + std::to_string(seq_len) +
                   "; " + (trained.adapters ? "adapters: " : "model: ") + std::to_string(trained.total()) +
                   " parameters; " + std::to_string(threads) + " threads");
}

// Where a LoRA run's frozen base is: --init for a new run, the base_model_name_or_path its
// latest adapters recorded for a resumed one.
Expected<std::string> lora_base_path(const TrainRun& run, const std::string& latest, const ModelConfig& config) {
  // Absolute, so a resume from another working directory finds it.
  if (!run.resume) return fs::absolute(*run.init_path).lexically_normal().string();
  KIPP_ASSIGN_OR_RETURN(const PeftAdapter saved, load_peft_adapter(latest, config));
  if (saved.base_model.empty()) {
    return make_error(latest + "/" + kAdapterConfigFile +
                      ": no base_model_name_or_path, so the frozen base is unknown");
  }
  return saved.base_model;
}

// "LoRA: frozen base PATH (bf16, 1192.3 MB); rank 16, alpha 32, 7 targets; 10092544 adapter parameters".
std::string lora_summary(const FrozenBase& base, const std::string& path, const AdapterLayout& adapters) {
  const LoraOptions& o = adapters.options();
  char line[160];
  std::snprintf(line, sizeof line,
                " (%s, %.1f MB); rank %u, alpha %g, dropout %g, %zu targets; %llu adapter parameters",
                base.storage().c_str(), double(base.bytes()) / 1e6, o.rank, o.alpha, o.dropout, o.targets.size(),
                static_cast<unsigned long long>(adapters.total()));
  return "LoRA: frozen base " + path + line;
}

// The validation loss of a model that knows token frequencies only (NaN without validation data).
double report_unigram_baseline(const TrainEvents& events, const data::PackedDataset& dataset, uint32_t vocab_size) {
  const double baseline =
      dataset.validation_count() ? dataset.unigram_baseline(vocab_size) : std::numeric_limits<double>::quiet_NaN();
  if (std::isfinite(baseline)) {
    char line[120];
    std::snprintf(line, sizeof line, "unigram baseline: validation loss %.3f (perplexity %.1f) without context",
                  baseline, std::exp(baseline));
    tell(events, line);
  }
  return baseline;
}

// run.dir with the run's config written into it; a resumed run's partial checkpoints removed.
// A resumed run's config includes this resume's --set overrides, so a later resume keeps them.
Status prepare_run_dir(const TrainRun& run) {
  const TrainConfig& config = run.config;
  KIPP_RETURN_IF_ERROR(write_text_file_atomic(config.run_dir + "/config.yaml", to_yaml(config)));
  if (run.resume) KIPP_RETURN_IF_ERROR(remove_partial_checkpoints(config.run_dir));
  return {};
}

// Every rank must run the same config on the same data, or their gradients would not belong to
// one model: rank 0's fingerprint of both goes to all ranks, which compare it with their own.
Status check_same_run(Collective& collective, const TrainRun& run, const TrainConfig& resolved,
                      const data::PackedDataset& dataset) {
  if (collective.size() == 1) return {};
  const std::string text = to_yaml(resolved) + rng_state_text(resolved.data.seed, dataset) +
                           (run.resume ? " resume" : "") + " until " + std::to_string(run.until_step.value_or(0)) +
                           " init " + run.init_path.value_or("");
  const uint64_t own = XXH3_64bits(text.data(), text.size());
  uint64_t rank0 = own;
  KIPP_RETURN_IF_ERROR(collective.broadcast(std::span<uint64_t>(&rank0, 1)));
  if (rank0 != own) {
    return make_error(
        "the config, flags or data differ from rank 0's; every rank needs the same --config, --set, "
        "--resume, --until-step and --init, and the same data files");
  }
  return {};
}

// Rank 0 tokenizes the data into the cache first; the other ranks then read that cache (or,
// on a host that does not share it, build their own).
Expected<data::PackedDataset> load_data_rank0_first(Collective& collective, const TrainConfig& resolved,
                                                    const data::TrainingTokenizer& tokenizer,
                                                    const data::CacheEvents& cache_events) {
  double barrier = 0;
  if (collective.rank() != 0) KIPP_RETURN_IF_ERROR(collective.sum(std::span<double>(&barrier, 1)));
  auto dataset = load_training_data(resolved, tokenizer, cache_events);
  if (collective.rank() == 0 && collective.size() > 1) {
    KIPP_RETURN_IF_ERROR(collective.sum(std::span<double>(&barrier, 1)));
  }
  return dataset;
}

}  // namespace

Expected<TrainSummary> run_training(const TrainRun& run, const TrainEvents& events, const std::atomic<bool>* stop) {
  const TrainConfig& config = run.config;
  const std::string latest = config.run_dir + "/latest";
  if (config.train.device == TrainDevice::Cuda) {
    if (!run.device_model) return cuda_step_unavailable();
    KIPP_RETURN_IF_ERROR(
        check_train_device(config, run.collective ? run.collective->size() : 1, GpuProbe{.built = true, .usable = {}}));
  }
  KIPP_RETURN_IF_ERROR(check_run_dir(run, latest));
  std::unique_ptr<Collective> one_process = run.collective ? nullptr : make_local_collective();
  Collective& collective = run.collective ? *run.collective : *one_process;
  const bool writes = collective.rank() == 0;

  const int threads = config.train.threads ? int(config.train.threads) : omp_get_num_procs();
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);

  // A resumed run keeps the tokenizer its checkpoints carry, wherever the original file went.
  const std::string tokenizer_path = run.resume ? latest + "/tokenizer.json" : config.tokenizer;
  KIPP_ASSIGN_OR_RETURN(data::TrainingTokenizer tokenizer, data::load_training_tokenizer(tokenizer_path));
  KIPP_ASSIGN_OR_RETURN(const TrainConfig resolved, resolve_vocab_size(config, tokenizer));
  const ModelConfig model_config = resolved.model_config(tokenizer.bos_id, tokenizer.eos_id);
  KIPP_RETURN_IF_ERROR(model_config.validate());
  const ParameterLayout layout(model_config);

  data::CacheEvents cache_events;
  cache_events.on_message = events.on_message;
  cache_events.on_progress = events.on_data_progress;
  cache_events.should_stop = [stop] { return stop && stop->load(); };
  KIPP_ASSIGN_OR_RETURN(data::PackedDataset dataset,
                        load_data_rank0_first(collective, resolved, tokenizer, cache_events));
  KIPP_RETURN_IF_ERROR(check_same_run(collective, run, resolved, dataset));

  // LoRA: the frozen base from --init (a resumed run: where its adapters say it is).
  const LoraOptions& lora = resolved.train.lora;
  std::optional<AdapterLayout> adapters;
  std::unique_ptr<FrozenBase> base;
  Trained trained{layout, nullptr, {}};
  if (lora.enabled()) {
    adapters.emplace(model_config, lora);
    KIPP_ASSIGN_OR_RETURN(trained.base, lora_base_path(run, latest, model_config));
    KIPP_ASSIGN_OR_RETURN(base, FrozenBase::open(model_config, trained.base));
    trained.adapters = &*adapters;
    tell(events, lora_summary(*base, trained.base, *adapters));
  }
  tell_data(events, dataset, resolved.train.seq_len, trained, threads);
  if (collective.size() > 1) {
    const TrainSection& t = resolved.train;
    tell(events,
         "data parallel: " + collective.describe() + "; each step " + std::to_string(collective.size()) + " ranks x " +
             std::to_string(t.grad_accum) + " micro-batches x " + std::to_string(t.micro_batch) +
             " windows; gradient sums " +
             (t.allreduce_overlap ? "start layer by layer during the backward pass" : "after the backward pass"));
  }
  const double baseline = report_unigram_baseline(events, dataset, tokenizer.vocab_size);

  TrainingModelOptions model_options;
  model_options.max_batch = resolved.train.micro_batch;
  model_options.seq_len = resolved.train.seq_len;
  model_options.recompute_blocks = resolved.train.recompute_blocks;
  model_options.precision = resolved.train.precision;
  const bool on_gpu = resolved.train.device == TrainDevice::Cuda;
  KIPP_ASSIGN_OR_RETURN(std::unique_ptr<TrainingModel> model,
                        base     ? TrainingModel::create_lora(*base, *adapters, model_options)
                        : on_gpu ? run.device_model(layout, model_options)
                                 : TrainingModel::create(layout, model_options));
  tell(events, on_gpu ? std::string("device: cuda (forward and backward on the GPU with BF16 products and FP32 sums; "
                                    "gradients accumulated, clipped and AdamW applied on the GPU)")
               : resolved.train.precision == Precision::Bf16
                   ? std::string("precision: bf16 products (BF16 operands, FP32 sums) on the ") +
                         kernels::cpu_kernels().name + " kernels"
                   : std::string("precision: fp32 products (OpenBLAS sgemm)"));

  TrainRun effective = run;
  effective.config = resolved;
  const std::string resume_dir = run.resume ? fs::canonical(latest).string() : std::string();
  // Rank 0 alone writes into run.dir; the others only read a resumed run's checkpoint.
  std::optional<ExclusiveLock> lock;
  std::optional<RunLog> log;
  if (writes) {
    std::error_code error;
    fs::create_directories(config.run_dir, error);
    if (error) return make_error("cannot create run.dir " + config.run_dir + ": " + error.message());
    // Two runs in one folder would prune and overwrite each other's checkpoints.
    KIPP_ASSIGN_OR_RETURN(ExclusiveLock acquired, ExclusiveLock::acquire(config.run_dir + "/.kipp-train.lock",
                                                                         "kipp train is using " + config.run_dir));
    lock.emplace(std::move(acquired));
    KIPP_RETURN_IF_ERROR(prepare_run_dir(run));
    std::optional<uint64_t> resume_step;
    if (run.resume) {
      KIPP_ASSIGN_OR_RETURN(TrainerState saved, load_trainer_state(resume_dir));
      resume_step = saved.step;
    }
    RunLogOptions log_options;
    log_options.resume_step = resume_step;
    log_options.sample_gpu = run.sample_gpu;
    KIPP_ASSIGN_OR_RETURN(log, RunLog::open(config.run_dir, log_options));
    // The line the validation loss must get below, beside it in TensorBoard and the plot's data.
    if (!run.resume && std::isfinite(baseline)) {
      KIPP_RETURN_IF_ERROR(log->record_scalar(0, "val/unigram_baseline", baseline));
    }
  }
  Loop loop(effective, events, trained, std::move(dataset), std::move(model), std::move(tokenizer), baseline,
            collective, log ? &*log : nullptr);
  if (run.resume) {
    KIPP_RETURN_IF_ERROR(loop.resume_from(resume_dir));
  } else {
    KIPP_RETURN_IF_ERROR(loop.start_fresh());
  }
  auto summary = loop.run(stop);
  if (!writes) return summary;
  // The loss curve of the run so far, whatever ended it.
  if (auto plot = plot_run(config.run_dir, ""); plot) {
    tell(events, "loss curve written to " + *plot);
  } else {
    tell(events, "no loss curve: " + plot.message());
  }
  return summary;
}

}  // namespace kipp::train
