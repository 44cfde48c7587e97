#include "train/training_model.h"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "train/fused_ops.h"
#include "train/linear_products.h"
#include "train/model_weights.h"

namespace kipp::train {
namespace {

void copy_rows(const float* from, size_t count, float* to) { std::memcpy(to, from, count * sizeof(float)); }

// What one decoder layer's backward needs from its forward. With recompute_blocks every layer
// but `input` points into one shared set, refilled by re-running the layer's forward.
struct LayerActivations {
  float* input = nullptr;      // [rows, hidden] residual stream entering the layer
  float* attn_rstd = nullptr;  // [rows]
  float* qkv = nullptr;        // [rows, qkv_width] the q, k, v projections, before the q/k norms
  float* qk_rstd = nullptr;    // [rows, q_heads + kv_heads]
  float* softmax = nullptr;    // [rows, q_heads, 2] attention row max and 1 / sum
  float* attn = nullptr;       // [rows, q_width] attention output, o_proj's input
  float* mid = nullptr;        // [rows, hidden] residual stream after attention
  float* ffn_rstd = nullptr;   // [rows]
  float* gate_up = nullptr;    // [rows, 2 * ffn] gate and up projections
};

// Rows of the output head processed at once: logits exist for one chunk at a time.
constexpr size_t kHeadChunkRows = 256;

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};

class CpuTrainingModel final : public TrainingModel {
 public:
  CpuTrainingModel(const ModelConfig& config, const TrainingModelOptions& options,
                   std::unique_ptr<ModelWeights> weights)
      : config_(config), options_(options), weights_(std::move(weights)) {}

  Status allocate();

  Expected<LossSums> forward_backward(std::span<const float> params, const TokenBatch& batch, float grad_scale,
                                      std::span<float> grads) override;
  Expected<LossSums> evaluate(std::span<const float> params, const TokenBatch& batch) override;
  Status logits(std::span<const float> params, std::span<const int32_t> inputs, uint32_t batch, uint32_t seq_len,
                std::span<float> out) override;
  void set_gradients_ready(GradientsReady ready) override { gradients_ready_ = std::move(ready); }
  uint64_t workspace_bytes() const override { return workspace_bytes_; }

 private:
  struct Step {
    size_t rows = 0;
    ops::HeadShape shape;
  };

  Expected<Step> check(std::span<const float> params, std::span<const int32_t> inputs, uint32_t batch,
                       uint32_t seq_len) const;
  Status check_targets(std::span<const int32_t> targets, const Step& step);
  int team() const { return std::max(1, std::min(omp_get_max_threads(), scratch_threads_)); }

  void forward(const int32_t* ids, const Step& step);
  void layer_forward(size_t layer, const Step& step, float* output);
  LossSums head(const int32_t* targets, const Step& step, float grad_scale, bool backward);
  void layer_backward(size_t layer, const Step& step);

  ModelConfig config_;
  TrainingModelOptions options_;
  std::unique_ptr<ModelWeights> weights_;
  GradientsReady gradients_ready_;
  size_t hidden_ = 0, ffn_ = 0, vocab_ = 0, q_width_ = 0, kv_width_ = 0, qkv_width_ = 0, qk_width_ = 0;
  float eps_ = 0;
  int scratch_threads_ = 1;
  uint64_t workspace_bytes_ = 0;

  std::unique_ptr<float, FreeDeleter> arena_;
  std::vector<float> rope_cos_, rope_sin_;
  std::vector<LayerActivations> layers_;
  float* final_input_ = nullptr;   // [rows, hidden] residual stream after the last layer
  float* final_rstd_ = nullptr;    // [rows]
  float* final_normed_ = nullptr;  // [rows, hidden] the head's input
  // Scratch shared by all layers.
  float* normed_ = nullptr;    // [rows, hidden] a norm's output
  float* d_normed_ = nullptr;  // [rows, hidden]
  float* d_stream_ = nullptr;  // [rows, hidden] gradient of the residual stream
  float* qk_ = nullptr;        // [rows, qk_width] normalized, rotated q and k
  float* d_qk_ = nullptr;      // [rows, qk_width]
  float* d_qkv_ = nullptr;     // [rows, qkv_width]
  float* d_attn_ = nullptr;    // [rows, q_width]
  float* dk_heads_ = nullptr;  // [rows, q_width]
  float* dv_heads_ = nullptr;  // [rows, q_width]
  float* act_ = nullptr;       // [rows, ffn]
  float* attention_scratch_ = nullptr;
  float* partials_ = nullptr;
  float* head_in_ = nullptr;            // [kHeadChunkRows, hidden]
  float* head_dx_ = nullptr;            // [kHeadChunkRows, hidden]
  float* head_logits_ = nullptr;        // [kHeadChunkRows, vocab]
  float* row_loss_ = nullptr;           // [rows]
  std::vector<uint32_t> counted_rows_;  // rows whose target counts, in order
  size_t counted_ = 0;
  std::vector<int32_t> chunk_targets_;
};

Status CpuTrainingModel::allocate() {
  hidden_ = config_.hidden_size;
  ffn_ = config_.ffn_size;
  vocab_ = config_.vocab_size;
  q_width_ = config_.q_width();
  kv_width_ = config_.kv_width();
  qk_width_ = q_width_ + kv_width_;
  qkv_width_ = q_width_ + 2 * kv_width_;
  eps_ = static_cast<float>(config_.rms_norm_eps);
  scratch_threads_ = std::max(1, omp_get_max_threads());

  const size_t rows = size_t{options_.max_batch} * options_.seq_len;
  const size_t chunk = std::min(rows, kHeadChunkRows);
  const size_t heads = config_.num_heads + config_.num_kv_heads;
  const size_t layer_count = config_.num_layers;
  layers_.assign(layer_count, {});

  // Two passes: the first sizes the arena, the second hands out pointers into it.
  auto plan = [&](float* base) {
    size_t used = 0;
    auto take = [&](size_t count) {
      float* p = base ? base + used : nullptr;
      used += (count + 15) / 16 * 16;  // 64-byte aligned buffers
      return p;
    };
    LayerActivations shared;
    auto fill = [&](LayerActivations& a) {
      a.attn_rstd = take(rows);
      a.qkv = take(rows * qkv_width_);
      a.qk_rstd = take(rows * heads);
      a.softmax = take(rows * config_.num_heads * 2);
      a.attn = take(rows * q_width_);
      a.mid = take(rows * hidden_);
      a.ffn_rstd = take(rows);
      a.gate_up = take(rows * 2 * ffn_);
    };
    if (options_.recompute_blocks) fill(shared);
    for (LayerActivations& a : layers_) {
      if (options_.recompute_blocks) {
        a = shared;
      } else {
        fill(a);
      }
      a.input = take(rows * hidden_);
    }
    final_input_ = take(rows * hidden_);
    final_rstd_ = take(rows);
    final_normed_ = take(rows * hidden_);
    normed_ = take(rows * hidden_);
    d_normed_ = take(rows * hidden_);
    d_stream_ = take(rows * hidden_);
    qk_ = take(rows * qk_width_);
    d_qk_ = take(rows * qk_width_);
    d_qkv_ = take(rows * qkv_width_);
    d_attn_ = take(rows * q_width_);
    dk_heads_ = take(rows * q_width_);
    dv_heads_ = take(rows * q_width_);
    act_ = take(rows * ffn_);
    attention_scratch_ = take(size_t(scratch_threads_) * ops::attention_scratch(options_.seq_len));
    partials_ = take(ops::reduction_partials(rows, std::max(hidden_, 2 * size_t{config_.head_dim})));
    head_in_ = take(chunk * hidden_);
    head_dx_ = take(chunk * hidden_);
    head_logits_ = take(chunk * vocab_);
    row_loss_ = take(rows);
    return used;
  };
  const size_t floats = plan(nullptr);
  arena_.reset(static_cast<float*>(std::aligned_alloc(64, floats * sizeof(float))));
  if (!arena_) {
    return make_error("training model: cannot allocate " + std::to_string(floats * sizeof(float)) +
                      " bytes of activations and scratch");
  }
  // Touched once here, so the step's first pass does not pay the page faults and the memory
  // report is what the process holds.
  std::memset(arena_.get(), 0, floats * sizeof(float));
  plan(arena_.get());

  const size_t half = config_.head_dim / 2;
  rope_cos_.resize(size_t{options_.seq_len} * half);
  rope_sin_.resize(rope_cos_.size());
  for (size_t position = 0; position < options_.seq_len; ++position) {
    for (size_t i = 0; i < half; ++i) {
      const double inv_freq = std::pow(config_.rope_theta, -2.0 * double(i) / double(config_.head_dim));
      const double angle = double(position) * inv_freq;
      rope_cos_[position * half + i] = static_cast<float>(std::cos(angle));
      rope_sin_[position * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  counted_rows_.resize(rows);
  chunk_targets_.resize(chunk);
  workspace_bytes_ = weights_->workspace_bytes() + floats * sizeof(float) + 2 * rope_cos_.size() * sizeof(float) +
                     rows * sizeof(uint32_t) + chunk * sizeof(int32_t);
  return {};
}

// A batch may be smaller and its rows shorter than create() sized the buffers for (a last,
// partial batch; evaluation on shorter rows): batch in 1..max_batch, seq_len in 1..seq_len.
Expected<CpuTrainingModel::Step> CpuTrainingModel::check(std::span<const float> params, std::span<const int32_t> inputs,
                                                         uint32_t batch, uint32_t seq_len) const {
  if (params.size() != weights_->parameter_count()) {
    return make_error("training model: parameter buffer has " + std::to_string(params.size()) + " floats, expected " +
                      std::to_string(weights_->parameter_count()));
  }
  if (batch == 0 || batch > options_.max_batch) {
    return make_error("training model: batch " + std::to_string(batch) + " is outside 1.." +
                      std::to_string(options_.max_batch));
  }
  if (seq_len == 0 || seq_len > options_.seq_len) {
    return make_error("training model: seq_len " + std::to_string(seq_len) + " is outside 1.." +
                      std::to_string(options_.seq_len));
  }
  const size_t rows = size_t{batch} * seq_len;
  if (inputs.size() != rows) {
    return make_error("training model: inputs hold " + std::to_string(inputs.size()) + " ids, expected batch " +
                      std::to_string(batch) + " x seq_len " + std::to_string(seq_len) + " = " + std::to_string(rows));
  }
  for (size_t i = 0; i < rows; ++i) {
    if (inputs[i] < 0 || size_t(inputs[i]) >= vocab_) {
      return make_error("training model: inputs[" + std::to_string(i) + "] = " + std::to_string(inputs[i]) +
                        " is not a token id (vocab " + std::to_string(vocab_) + ")");
    }
  }
  Step step;
  step.rows = rows;
  step.shape.batch = batch;
  step.shape.seq_len = seq_len;
  step.shape.q_heads = config_.num_heads;
  step.shape.kv_heads = config_.num_kv_heads;
  step.shape.head_dim = config_.head_dim;
  return step;
}

Status CpuTrainingModel::check_targets(std::span<const int32_t> targets, const Step& step) {
  if (targets.size() != step.rows) {
    return make_error("training model: targets hold " + std::to_string(targets.size()) + " ids, expected " +
                      std::to_string(step.rows));
  }
  counted_ = 0;
  for (size_t i = 0; i < step.rows; ++i) {
    if (targets[i] == kIgnoreTarget) continue;
    if (targets[i] < 0 || size_t(targets[i]) >= vocab_) {
      return make_error("training model: targets[" + std::to_string(i) + "] = " + std::to_string(targets[i]) +
                        " is neither a token id (vocab " + std::to_string(vocab_) + ") nor " +
                        std::to_string(kIgnoreTarget));
    }
    counted_rows_[counted_++] = static_cast<uint32_t>(i);
  }
  return {};
}

void CpuTrainingModel::forward(const int32_t* ids, const Step& step) {
  weights_->embed(ids, step.rows, layers_[0].input);
  for (size_t l = 0; l < layers_.size(); ++l) {
    layer_forward(l, step, l + 1 < layers_.size() ? layers_[l + 1].input : final_input_);
  }
  ops::rmsnorm_forward(final_input_, weights_->final_gain(), step.rows, hidden_, eps_, final_rstd_, final_normed_);
}

// `output` null: only what the backward needs (the recompute before a layer's backward).
void CpuTrainingModel::layer_forward(size_t layer, const Step& step, float* output) {
  ModelWeights& w = *weights_;
  const LayerActivations& a = layers_[layer];
  const size_t rows = step.rows;
  const ops::RopeTables rope{rope_cos_.data(), rope_sin_.data()};

  ops::rmsnorm_forward(a.input, w.gain(layer, Gain::Attn), rows, hidden_, eps_, a.attn_rstd, normed_);
  w.forward(layer, Block::Qkv, normed_, rows, false, a.qkv);
  ops::qk_norm_rope_forward(a.qkv, w.gain(layer, Gain::Q), w.gain(layer, Gain::K), step.shape, rope, eps_, a.qk_rstd,
                            qk_);
  ops::attention_forward(qk_, a.qkv, step.shape, attention_scratch_, team(), a.softmax, a.attn);
  copy_rows(a.input, rows * hidden_, a.mid);
  w.forward(layer, Block::O, a.attn, rows, true, a.mid);

  ops::rmsnorm_forward(a.mid, w.gain(layer, Gain::Ffn), rows, hidden_, eps_, a.ffn_rstd, normed_);
  w.forward(layer, Block::GateUp, normed_, rows, false, a.gate_up);
  if (!output) return;
  ops::swiglu_forward(a.gate_up, rows, ffn_, act_);
  copy_rows(a.mid, rows * hidden_, output);
  w.forward(layer, Block::Down, act_, rows, true, output);
}

// Output head and cross-entropy over the counted rows, kHeadChunkRows at a time. With `backward`,
// also the head's weight gradient and d(final_normed) into d_normed_.
LossSums CpuTrainingModel::head(const int32_t* targets, const Step& step, float grad_scale, bool backward) {
  if (backward) std::memset(d_normed_, 0, step.rows * hidden_ * sizeof(float));
  for (size_t start = 0; start < counted_; start += kHeadChunkRows) {
    const size_t n = std::min(kHeadChunkRows, counted_ - start);
    const uint32_t* rows = counted_rows_.data() + start;
    for (size_t i = 0; i < n; ++i) {
      copy_rows(final_normed_ + size_t(rows[i]) * hidden_, hidden_, head_in_ + i * hidden_);
      chunk_targets_[i] = targets[rows[i]];
    }
    weights_->head_forward(head_in_, n, head_logits_);
    ops::cross_entropy(head_logits_, chunk_targets_.data(), n, vocab_, backward, grad_scale, row_loss_ + start);
    if (!backward) continue;
    weights_->head_backward(head_logits_, head_in_, n, head_dx_);
    for (size_t i = 0; i < n; ++i) copy_rows(head_dx_ + i * hidden_, hidden_, d_normed_ + size_t(rows[i]) * hidden_);
  }
  LossSums sums;
  for (size_t i = 0; i < counted_; ++i) sums.loss_sum += double(row_loss_[i]);
  sums.counted = counted_;
  return sums;
}

// d_stream_ holds d(loss)/d(layer output) on entry and d(loss)/d(layer input) on return.
void CpuTrainingModel::layer_backward(size_t layer, const Step& step) {
  // The forward pass left the last layer's activations in the shared set.
  if (options_.recompute_blocks && layer + 1 < layers_.size()) layer_forward(layer, step, nullptr);
  ModelWeights& w = *weights_;
  const LayerActivations& a = layers_[layer];
  const size_t rows = step.rows;
  const ops::RopeTables rope{rope_cos_.data(), rope_sin_.data()};

  // Feed-forward: gate_up becomes its own gradient and act_ the down projection's input.
  w.backward_input(layer, Block::Down, d_stream_, rows, act_);
  ops::swiglu_backward(a.gate_up, act_, rows, ffn_);
  w.backward_weights(layer, Block::Down, d_stream_, act_, rows);
  ops::rmsnorm_apply(a.mid, a.ffn_rstd, w.gain(layer, Gain::Ffn), rows, hidden_, normed_);
  w.backward_weights(layer, Block::GateUp, a.gate_up, normed_, rows);
  w.backward_input(layer, Block::GateUp, a.gate_up, rows, d_normed_);
  ops::rmsnorm_backward(d_normed_, a.mid, a.ffn_rstd, w.gain(layer, Gain::Ffn), rows, hidden_, partials_, d_stream_,
                        w.gain_grad(layer, Gain::Ffn));

  // Attention.
  w.backward_weights(layer, Block::O, d_stream_, a.attn, rows);
  w.backward_input(layer, Block::O, d_stream_, rows, d_attn_);
  ops::qk_norm_rope_forward(a.qkv, w.gain(layer, Gain::Q), w.gain(layer, Gain::K), step.shape, rope, eps_, a.qk_rstd,
                            qk_);
  ops::attention_backward(qk_, a.qkv, a.softmax, d_attn_, step.shape, attention_scratch_, team(), d_qk_, dk_heads_,
                          dv_heads_);
  ops::reduce_kv_heads(dk_heads_, step.shape, qk_width_, d_qk_ + q_width_);
  ops::reduce_kv_heads(dv_heads_, step.shape, qkv_width_, d_qkv_ + qk_width_);
  ops::qk_norm_rope_backward(d_qk_, a.qkv, a.qk_rstd, w.gain(layer, Gain::Q), w.gain(layer, Gain::K), step.shape, rope,
                             partials_, d_qkv_, w.gain_grad(layer, Gain::Q), w.gain_grad(layer, Gain::K));
  ops::rmsnorm_apply(a.input, a.attn_rstd, w.gain(layer, Gain::Attn), rows, hidden_, normed_);
  w.backward_weights(layer, Block::Qkv, d_qkv_, normed_, rows);
  w.backward_input(layer, Block::Qkv, d_qkv_, rows, d_normed_);
  ops::rmsnorm_backward(d_normed_, a.input, a.attn_rstd, w.gain(layer, Gain::Attn), rows, hidden_, partials_, d_stream_,
                        w.gain_grad(layer, Gain::Attn));
}

Expected<LossSums> CpuTrainingModel::forward_backward(std::span<const float> params, const TokenBatch& batch,
                                                      float grad_scale, std::span<float> grads) {
  KIPP_ASSIGN_OR_RETURN(const Step step, check(params, batch.inputs, batch.batch, batch.seq_len));
  KIPP_RETURN_IF_ERROR(check_targets(batch.targets, step));
  if (grads.size() != weights_->parameter_count()) {
    return make_error("training model: gradient buffer has " + std::to_string(grads.size()) + " floats, expected " +
                      std::to_string(weights_->parameter_count()));
  }
  weights_->begin({params.data(), grads.data(), true, batch.noise_key});
  forward(batch.inputs.data(), step);
  const LossSums sums = head(batch.targets.data(), step, grad_scale, true);
  std::memset(d_stream_, 0, step.rows * hidden_ * sizeof(float));
  ops::rmsnorm_backward(d_normed_, final_input_, final_rstd_, weights_->final_gain(), step.rows, hidden_, partials_,
                        d_stream_, weights_->final_gain_grad());
  for (size_t l = layers_.size(); l-- > 0;) {
    layer_backward(l, step);
    const BufferSlice done = weights_->layer_gradients(l);
    if (gradients_ready_ && done.count) gradients_ready_(done.offset, done.count);
  }
  weights_->embed_backward(d_stream_, batch.inputs.data(), step.rows);
  return sums;
}

Expected<LossSums> CpuTrainingModel::evaluate(std::span<const float> params, const TokenBatch& batch) {
  KIPP_ASSIGN_OR_RETURN(const Step step, check(params, batch.inputs, batch.batch, batch.seq_len));
  KIPP_RETURN_IF_ERROR(check_targets(batch.targets, step));
  weights_->begin({params.data(), nullptr, false, 0});
  forward(batch.inputs.data(), step);
  return head(batch.targets.data(), step, 0.0f, false);
}

Status CpuTrainingModel::logits(std::span<const float> params, std::span<const int32_t> inputs, uint32_t batch,
                                uint32_t seq_len, std::span<float> out) {
  KIPP_ASSIGN_OR_RETURN(const Step step, check(params, inputs, batch, seq_len));
  if (out.size() != step.rows * vocab_) {
    return make_error("training model: logits buffer holds " + std::to_string(out.size()) + " floats, expected " +
                      std::to_string(step.rows) + " x vocab " + std::to_string(vocab_));
  }
  weights_->begin({params.data(), nullptr, false, 0});
  forward(inputs.data(), step);
  weights_->head_forward(final_normed_, step.rows, out.data());
  return {};
}

}  // namespace

namespace {

Status check_options(const TrainingModelOptions& options) {
  if (options.max_batch == 0 || options.seq_len == 0) {
    return make_error("training model: max_batch and seq_len must be positive (got " +
                      std::to_string(options.max_batch) + " and " + std::to_string(options.seq_len) + ")");
  }
  // BLAS takes row counts as int.
  const uint64_t rows = uint64_t{options.max_batch} * options.seq_len;
  if (rows > uint64_t{INT_MAX}) {
    return make_error("training model: max_batch x seq_len = " + std::to_string(rows) + " rows is too large");
  }
  return {};
}

Expected<std::unique_ptr<TrainingModel>> make_model(const ModelConfig& config, const TrainingModelOptions& options,
                                                    std::unique_ptr<ModelWeights> weights) {
  auto model = std::make_unique<CpuTrainingModel>(config, options, std::move(weights));
  KIPP_RETURN_IF_ERROR(model->allocate());
  return std::unique_ptr<TrainingModel>(std::move(model));
}

}  // namespace

Expected<std::unique_ptr<TrainingModel>> TrainingModel::create(const ParameterLayout& layout,
                                                               const TrainingModelOptions& options) {
  KIPP_RETURN_IF_ERROR(layout.config().validate());
  KIPP_RETURN_IF_ERROR(check_options(options));
  KIPP_ASSIGN_OR_RETURN(std::unique_ptr<LinearProducts> products, make_linear_products(options.precision));
  return make_model(layout.config(), options, make_full_weights(layout, std::move(products)));
}

Expected<std::unique_ptr<TrainingModel>> TrainingModel::create_lora(const FrozenBase& base,
                                                                    const AdapterLayout& adapters,
                                                                    const TrainingModelOptions& options) {
  KIPP_RETURN_IF_ERROR(check_options(options));
  KIPP_ASSIGN_OR_RETURN(std::unique_ptr<LinearProducts> products, make_linear_products(options.precision));
  KIPP_ASSIGN_OR_RETURN(
      std::unique_ptr<ModelWeights> weights,
      make_lora_weights(base, adapters, std::move(products), size_t{options.max_batch} * options.seq_len));
  return make_model(base.config(), options, std::move(weights));
}

}  // namespace kipp::train
