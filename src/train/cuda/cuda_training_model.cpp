#include "train/cuda/cuda_training_model.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/train_embedding_plan.h"
#include "kernels/cuda/train_gemm.h"
#include "kernels/cuda/train_head.h"
#include "kernels/cuda/train_kernels.h"
#include "train/cuda/decay_runs.h"
#include "train/device_optimizer.h"

namespace kipp::train::cuda {
namespace {

namespace gpu = kipp::cuda::train;
using bf16 = __nv_bfloat16;

Status cuda_ok(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return ok_status();
  return make_error(std::string("GPU training: ") + what + ": " + cudaGetErrorString(error));
}

// One device allocation, freed with its owner.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), count_(other.count_) { other.data_ = nullptr; }
  ~DeviceBuffer() { cudaFree(data_); }

  // A buffer allocated before is freed first.
  Status allocate(size_t count) {
    cudaFree(data_);
    data_ = nullptr;
    count_ = count;
    return cuda_ok(cudaMalloc(&data_, std::max<size_t>(1, count) * sizeof(T)), "cudaMalloc");
  }
  T* get() const { return data_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

// What one layer's backward reads of its forward, apart from the layer's input.
struct LayerActivations {
  DeviceBuffer<float> attn_rstd, qkv, qk_rstd, qk, stats, attn, mid, ffn_rstd, gate_up;
  DeviceBuffer<bf16> attn_normed, attn_out, ffn_normed;  // the products' BF16 inputs
};

// Where a pass leaves its parameters' gradient: nowhere (evaluation), added into the host's
// buffer, or added into the resident device gradient (the device optimizer's step).
enum class GradientsTo { None, Host, Device };

class CudaTrainingModel final : public TrainingModel, public DeviceOptimizer {
 public:
  CudaTrainingModel(const ParameterLayout& layout, const TrainingModelOptions& options)
      : layout_(layout), config_(layout.config()), options_(options) {}
  ~CudaTrainingModel() override {
    gemm_.reset();
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status allocate();

  Expected<LossSums> forward_backward(std::span<const float> params, const TokenBatch& batch, float grad_scale,
                                      std::span<float> grads) override {
    return run(params, batch.inputs, batch.targets, batch.batch, batch.seq_len, grad_scale, GradientsTo::Host, grads);
  }
  void set_gradients_ready(GradientsReady) override {}
  Expected<LossSums> evaluate(std::span<const float> params, const TokenBatch& batch) override {
    return run(params, batch.inputs, batch.targets, batch.batch, batch.seq_len, 0.0f, GradientsTo::None, {});
  }
  Status logits(std::span<const float> params, std::span<const int32_t> inputs, uint32_t batch, uint32_t seq_len,
                std::span<float> out) override;
  uint64_t workspace_bytes() const override { return workspace_bytes_; }
  DeviceOptimizer* device_optimizer() override { return this; }

  Status load(std::span<const float> params, const AdamW& optimizer) override;
  Status store(std::span<float> params, AdamW& optimizer) override;
  Status clear_gradients() override {
    return cuda_ok(cudaMemsetAsync(grads_.get(), 0, layout_.total() * sizeof(float), stream_), "clear gradients");
  }
  Expected<LossSums> accumulate(const TokenBatch& batch, float grad_scale) override {
    if (!resident_) return make_error("GPU training: no parameters were loaded for the device optimizer");
    return run({}, batch.inputs, batch.targets, batch.batch, batch.seq_len, grad_scale, GradientsTo::Device, {});
  }
  Expected<double> gradient_norm() override;
  Status scale_gradients(float factor) override {
    return cuda_ok(gpu::scale(grads_.get(), layout_.total(), factor, stream_), "gradient scaling");
  }
  Status step(double lr, uint64_t step_number) override;

 private:
  // `params` empty: the resident parameters (load()), already rounded to BF16.
  Expected<LossSums> run(std::span<const float> params, std::span<const int32_t> inputs,
                         std::span<const int32_t> targets, uint32_t batch, uint32_t seq_len, float grad_scale,
                         GradientsTo to, std::span<float> grads);
  // Checks the batch, uploads the parameters (unless resident) and ids and runs the layers and
  // the final norm.
  Expected<gpu::QkvShape> forward_pass(std::span<const float> params, std::span<const int32_t> inputs, uint32_t batch,
                                       uint32_t seq_len);
  Status forward(uint32_t rows, const gpu::QkvShape& shape);
  // One layer from its kept input into activations(layer); `output` null (a recomputation
  // before the layer's backward pass) stops once everything the backward pass reads is there.
  Status layer_forward(size_t layer, uint32_t rows, const gpu::QkvShape& shape, float* output);
  // With recompute_blocks every layer shares one set of activations, refilled before its
  // backward pass, and only the layers' inputs are kept through the forward pass.
  LayerActivations& activations(size_t layer) { return activations_[options_.recompute_blocks ? 0 : layer]; }
  // Allocates a buffer that counts as workspace (activations and scratch).
  template <typename T>
  Status hold(DeviceBuffer<T>& buffer, size_t count) {
    KIPP_RETURN_IF_ERROR(buffer.allocate(count));
    workspace_bytes_ += buffer.bytes();
    return ok_status();
  }
  Status upload(void* dst, const void* src, size_t bytes) {
    return cuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "upload");
  }
  Status layer_backward(size_t layer, uint32_t rows, const gpu::QkvShape& shape);
  // dst = src (device floats), on the stream.
  Status copy(float* dst, const float* src, size_t count) {
    return cuda_ok(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, stream_), "copy");
  }
  Status to_bf16(const float* x, size_t count, bf16* out) {
    return cuda_ok(gpu::round_to_bf16(x, count, out, stream_), "round to bf16");
  }
  const float* param(uint64_t offset) const { return params_.get() + offset; }
  const bf16* weight(uint64_t offset) const { return weights_.get() + offset; }
  float* grad(uint64_t offset) const { return grads_.get() + offset; }

  ParameterLayout layout_;
  ModelConfig config_;
  TrainingModelOptions options_;
  size_t hidden_ = 0, ffn_ = 0, q_width_ = 0, qk_width_ = 0, qkv_width_ = 0, vocab_ = 0;
  uint64_t workspace_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<gpu::TrainGemm> gemm_;

  DeviceBuffer<float> params_, grads_;
  DeviceBuffer<bf16> weights_;                     // the parameters rounded to BF16, same offsets
  std::vector<DeviceBuffer<float>> layer_inputs_;  // the residual stream entering each layer
  std::vector<LayerActivations> activations_;
  DeviceBuffer<float> final_x_, final_rstd_, final_normed_, normed_, act_, rope_cos_, rope_sin_;
  DeviceBuffer<bf16> act_bf16_, d_bf16_;
  DeviceBuffer<float> d_stream_, d_mid_, d_normed_, d_act_, d_attn_, d_qk_, d_qkv_, row_dots_, partials_, row_loss_;
  DeviceBuffer<bf16> head_input_, head_dlogits_;
  DeviceBuffer<float> head_logits_, head_dinput_;
  DeviceBuffer<int32_t> ids_, counted_targets_, plan_ids_;
  DeviceBuffer<uint32_t> counted_rows_, plan_starts_, plan_rows_;
  std::vector<float> host_grads_, host_loss_;
  // The device optimizer's state, allocated by the first load().
  bool resident_ = false;
  AdamWOptions adamw_;
  DeviceBuffer<float> first_moment_, second_moment_;
  DeviceBuffer<gpu::DecayRun> decay_runs_;
  uint32_t run_count_ = 0;
  uint64_t longest_run_ = 0;
  DeviceBuffer<double> norm_partials_, norm_total_;
};

Status CudaTrainingModel::load(std::span<const float> params, const AdamW& optimizer) {
  const uint64_t total = layout_.total();
  if (params.size() != total || optimizer.first_moment().size() != total || optimizer.second_moment().size() != total)
    return make_error("GPU training: the parameters and moments to load are not " + std::to_string(total) +
                      " floats each");
  const std::vector<gpu::DecayRun> runs = decay_runs(optimizer.decay_ranges());
  if (runs.size() > 65535) return make_error("GPU training: too many weight-decay runs for one AdamW launch");
  if (!resident_) {
    KIPP_RETURN_IF_ERROR(first_moment_.allocate(total));
    KIPP_RETURN_IF_ERROR(second_moment_.allocate(total));
    KIPP_RETURN_IF_ERROR(norm_partials_.allocate(gpu::kNormBlocks));
    KIPP_RETURN_IF_ERROR(norm_total_.allocate(1));
  }
  KIPP_RETURN_IF_ERROR(decay_runs_.allocate(runs.size()));
  run_count_ = uint32_t(runs.size());
  longest_run_ = 0;
  for (const gpu::DecayRun& run : runs) longest_run_ = std::max(longest_run_, run.count);
  adamw_ = optimizer.options();
  const size_t bytes = total * sizeof(float);
  KIPP_RETURN_IF_ERROR(upload(decay_runs_.get(), runs.data(), runs.size() * sizeof(gpu::DecayRun)));
  KIPP_RETURN_IF_ERROR(upload(params_.get(), params.data(), bytes));
  KIPP_RETURN_IF_ERROR(upload(first_moment_.get(), optimizer.first_moment().data(), bytes));
  KIPP_RETURN_IF_ERROR(upload(second_moment_.get(), optimizer.second_moment().data(), bytes));
  KIPP_RETURN_IF_ERROR(to_bf16(params_.get(), total, weights_.get()));
  KIPP_RETURN_IF_ERROR(cuda_ok(cudaStreamSynchronize(stream_), "optimizer state upload"));
  resident_ = true;
  return ok_status();
}

Status CudaTrainingModel::store(std::span<float> params, AdamW& optimizer) {
  const uint64_t total = layout_.total();
  if (!resident_) return make_error("GPU training: no parameters were loaded for the device optimizer");
  if (params.size() != total || optimizer.first_moment().size() != total || optimizer.second_moment().size() != total)
    return make_error("GPU training: the buffers to store into are not " + std::to_string(total) + " floats each");
  const size_t bytes = total * sizeof(float);
  const auto download = [&](void* dst, const void* src) {
    return cuda_ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "optimizer state download");
  };
  KIPP_RETURN_IF_ERROR(download(params.data(), params_.get()));
  KIPP_RETURN_IF_ERROR(download(optimizer.first_moment().data(), first_moment_.get()));
  KIPP_RETURN_IF_ERROR(download(optimizer.second_moment().data(), second_moment_.get()));
  return cuda_ok(cudaStreamSynchronize(stream_), "optimizer state download");
}

Expected<double> CudaTrainingModel::gradient_norm() {
  if (!resident_) return make_error("GPU training: no parameters were loaded for the device optimizer");
  KIPP_RETURN_IF_ERROR(
      cuda_ok(gpu::sum_of_squares(grads_.get(), layout_.total(), norm_partials_.get(), norm_total_.get(), stream_),
              "gradient norm"));
  double sum = 0;
  KIPP_RETURN_IF_ERROR(cuda_ok(cudaMemcpyAsync(&sum, norm_total_.get(), sizeof sum, cudaMemcpyDeviceToHost, stream_),
                               "gradient norm download"));
  KIPP_RETURN_IF_ERROR(cuda_ok(cudaStreamSynchronize(stream_), "gradient norm"));
  return std::sqrt(sum);
}

Status CudaTrainingModel::step(double lr, uint64_t step_number) {
  if (!resident_) return make_error("GPU training: no parameters were loaded for the device optimizer");
  const gpu::AdamWScalars scalars =
      gpu::adamw_scalars(adamw_.beta1, adamw_.beta2, adamw_.eps, adamw_.weight_decay, lr, step_number);
  KIPP_RETURN_IF_ERROR(cuda_ok(gpu::adamw_step(params_.get(), grads_.get(), first_moment_.get(), second_moment_.get(),
                                               decay_runs_.get(), run_count_, longest_run_, scalars, stream_),
                               "AdamW step"));
  // The next pass's products read the updated parameters' BF16 copies.
  return to_bf16(params_.get(), layout_.total(), weights_.get());
}

Status CudaTrainingModel::allocate() {
  hidden_ = config_.hidden_size;
  ffn_ = config_.ffn_size;
  q_width_ = size_t{config_.num_heads} * config_.head_dim;
  qk_width_ = size_t{config_.num_heads + config_.num_kv_heads} * config_.head_dim;
  qkv_width_ = size_t{config_.num_heads + 2 * config_.num_kv_heads} * config_.head_dim;
  vocab_ = config_.vocab_size;
  if (config_.head_dim % 32 != 0 || config_.head_dim > gpu::kMaxHeadDim) {
    return make_error("GPU training: head_dim " + std::to_string(config_.head_dim) + " is not a multiple of 32 up to " +
                      std::to_string(gpu::kMaxHeadDim));
  }
  KIPP_RETURN_IF_ERROR(cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  KIPP_ASSIGN_OR_RETURN(gemm_, gpu::TrainGemm::create(stream_));

  const size_t rows = size_t{options_.max_batch} * options_.seq_len;
  const size_t heads = config_.num_heads + config_.num_kv_heads;
  const uint64_t total = layout_.total();
  KIPP_RETURN_IF_ERROR(params_.allocate(total));
  KIPP_RETURN_IF_ERROR(grads_.allocate(total));
  KIPP_RETURN_IF_ERROR(weights_.allocate(total));
  layer_inputs_.resize(config_.num_layers);
  for (DeviceBuffer<float>& input : layer_inputs_) KIPP_RETURN_IF_ERROR(hold(input, rows * hidden_));
  activations_.resize(options_.recompute_blocks ? 1 : config_.num_layers);
  for (LayerActivations& s : activations_) {
    KIPP_RETURN_IF_ERROR(hold(s.attn_rstd, rows));
    KIPP_RETURN_IF_ERROR(hold(s.qkv, rows * qkv_width_));
    KIPP_RETURN_IF_ERROR(hold(s.qk_rstd, rows * heads));
    KIPP_RETURN_IF_ERROR(hold(s.qk, rows * qk_width_));
    KIPP_RETURN_IF_ERROR(hold(s.stats, rows * config_.num_heads * 2));
    KIPP_RETURN_IF_ERROR(hold(s.attn, rows * q_width_));
    KIPP_RETURN_IF_ERROR(hold(s.mid, rows * hidden_));
    KIPP_RETURN_IF_ERROR(hold(s.ffn_rstd, rows));
    KIPP_RETURN_IF_ERROR(hold(s.gate_up, rows * 2 * ffn_));
    KIPP_RETURN_IF_ERROR(hold(s.attn_normed, rows * hidden_));
    KIPP_RETURN_IF_ERROR(hold(s.attn_out, rows * q_width_));
    KIPP_RETURN_IF_ERROR(hold(s.ffn_normed, rows * hidden_));
  }
  const size_t widest = std::max({2 * ffn_, qkv_width_, hidden_});
  KIPP_RETURN_IF_ERROR(hold(final_x_, rows * hidden_));
  KIPP_RETURN_IF_ERROR(hold(final_rstd_, rows));
  KIPP_RETURN_IF_ERROR(hold(final_normed_, rows * hidden_));
  KIPP_RETURN_IF_ERROR(hold(normed_, rows * hidden_));
  KIPP_RETURN_IF_ERROR(hold(act_, rows * ffn_));
  KIPP_RETURN_IF_ERROR(hold(act_bf16_, rows * ffn_));
  KIPP_RETURN_IF_ERROR(hold(d_bf16_, rows * widest));
  KIPP_RETURN_IF_ERROR(hold(d_stream_, rows * hidden_));
  KIPP_RETURN_IF_ERROR(hold(d_mid_, rows * hidden_));
  KIPP_RETURN_IF_ERROR(hold(d_normed_, rows * hidden_));
  KIPP_RETURN_IF_ERROR(hold(d_act_, rows * ffn_));
  KIPP_RETURN_IF_ERROR(hold(d_attn_, rows * q_width_));
  KIPP_RETURN_IF_ERROR(hold(d_qk_, rows * qk_width_));
  KIPP_RETURN_IF_ERROR(hold(d_qkv_, rows * qkv_width_));
  KIPP_RETURN_IF_ERROR(hold(row_dots_, rows * config_.num_heads));
  KIPP_RETURN_IF_ERROR(
      hold(partials_, gpu::gain_partials(uint32_t(rows), uint32_t(std::max<size_t>(hidden_, 2 * config_.head_dim)))));
  KIPP_RETURN_IF_ERROR(hold(row_loss_, rows));
  KIPP_RETURN_IF_ERROR(hold(head_input_, size_t{gpu::kHeadChunkRows} * hidden_));
  KIPP_RETURN_IF_ERROR(hold(head_dlogits_, size_t{gpu::kHeadChunkRows} * vocab_));
  KIPP_RETURN_IF_ERROR(hold(head_logits_, size_t{gpu::kHeadChunkRows} * vocab_));
  KIPP_RETURN_IF_ERROR(hold(head_dinput_, size_t{gpu::kHeadChunkRows} * hidden_));
  KIPP_RETURN_IF_ERROR(hold(ids_, rows));
  KIPP_RETURN_IF_ERROR(hold(counted_targets_, rows));
  KIPP_RETURN_IF_ERROR(hold(counted_rows_, rows));
  KIPP_RETURN_IF_ERROR(hold(plan_ids_, rows));
  KIPP_RETURN_IF_ERROR(hold(plan_starts_, rows + 1));
  KIPP_RETURN_IF_ERROR(hold(plan_rows_, rows));

  // The CPU model's rotary tables, computed the same way on the host.
  const size_t half = config_.head_dim / 2;
  std::vector<float> cos(size_t{options_.seq_len} * half), sin(cos.size());
  for (size_t position = 0; position < options_.seq_len; ++position) {
    for (size_t i = 0; i < half; ++i) {
      const double inv_freq = std::pow(config_.rope_theta, -2.0 * double(i) / double(config_.head_dim));
      const double angle = double(position) * inv_freq;
      cos[position * half + i] = static_cast<float>(std::cos(angle));
      sin[position * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  KIPP_RETURN_IF_ERROR(hold(rope_cos_, cos.size()));
  KIPP_RETURN_IF_ERROR(hold(rope_sin_, sin.size()));
  KIPP_RETURN_IF_ERROR(cuda_ok(
      cudaMemcpy(rope_cos_.get(), cos.data(), cos.size() * sizeof(float), cudaMemcpyHostToDevice), "rope upload"));
  KIPP_RETURN_IF_ERROR(cuda_ok(
      cudaMemcpy(rope_sin_.get(), sin.data(), sin.size() * sizeof(float), cudaMemcpyHostToDevice), "rope upload"));
  host_loss_.resize(rows);
  return ok_status();
}

Status CudaTrainingModel::forward(uint32_t rows, const gpu::QkvShape& shape) {
  for (size_t l = 0; l < layer_inputs_.size(); ++l) {
    float* output = l + 1 < layer_inputs_.size() ? layer_inputs_[l + 1].get() : final_x_.get();
    KIPP_RETURN_IF_ERROR(layer_forward(l, rows, shape, output));
  }
  return cuda_ok(gpu::rmsnorm_forward(final_x_.get(), param(layout_.final_norm()), rows, uint32_t(hidden_),
                                      float(config_.rms_norm_eps), final_rstd_.get(), final_normed_.get(), stream_),
                 "final norm");
}

Status CudaTrainingModel::layer_forward(size_t l, uint32_t rows, const gpu::QkvShape& shape, float* output) {
  const float eps = float(config_.rms_norm_eps);
  const float* input = layer_inputs_[l].get();
  LayerActivations& s = activations(l);
  const LayerOffsets& o = layout_.layers()[l];
  KIPP_RETURN_IF_ERROR(cuda_ok(gpu::rmsnorm_forward(input, param(o.attn_norm), rows, uint32_t(hidden_), eps,
                                                    s.attn_rstd.get(), normed_.get(), stream_),
                               "attention norm"));
  KIPP_RETURN_IF_ERROR(to_bf16(normed_.get(), rows * hidden_, s.attn_normed.get()));
  KIPP_RETURN_IF_ERROR(gemm_->xwt(s.attn_normed.get(), weight(o.q_proj), rows, qkv_width_, hidden_, 0.0f, s.qkv.get()));
  KIPP_RETURN_IF_ERROR(
      cuda_ok(gpu::qk_norm_rope_forward(s.qkv.get(), param(o.q_norm), param(o.k_norm), shape, rope_cos_.get(),
                                        rope_sin_.get(), eps, s.qk_rstd.get(), s.qk.get(), stream_),
              "q/k norm and rope"));
  KIPP_RETURN_IF_ERROR(cuda_ok(
      gpu::attention_forward(s.qk.get(), s.qkv.get(), shape, s.stats.get(), s.attn.get(), stream_), "attention"));
  KIPP_RETURN_IF_ERROR(to_bf16(s.attn.get(), rows * q_width_, s.attn_out.get()));
  KIPP_RETURN_IF_ERROR(copy(s.mid.get(), input, rows * hidden_));
  KIPP_RETURN_IF_ERROR(gemm_->xwt(s.attn_out.get(), weight(o.o_proj), rows, hidden_, q_width_, 1.0f, s.mid.get()));
  KIPP_RETURN_IF_ERROR(cuda_ok(gpu::rmsnorm_forward(s.mid.get(), param(o.ffn_norm), rows, uint32_t(hidden_), eps,
                                                    s.ffn_rstd.get(), normed_.get(), stream_),
                               "feed-forward norm"));
  KIPP_RETURN_IF_ERROR(to_bf16(normed_.get(), rows * hidden_, s.ffn_normed.get()));
  KIPP_RETURN_IF_ERROR(
      gemm_->xwt(s.ffn_normed.get(), weight(o.gate_proj), rows, 2 * ffn_, hidden_, 0.0f, s.gate_up.get()));
  // The backward pass derives the activation from gate_up itself.
  if (output == nullptr) return ok_status();
  KIPP_RETURN_IF_ERROR(
      cuda_ok(gpu::swiglu_forward(s.gate_up.get(), rows, uint32_t(ffn_), act_.get(), stream_), "swiglu"));
  KIPP_RETURN_IF_ERROR(to_bf16(act_.get(), rows * ffn_, act_bf16_.get()));
  KIPP_RETURN_IF_ERROR(copy(output, s.mid.get(), rows * hidden_));
  return gemm_->xwt(act_bf16_.get(), weight(o.down_proj), rows, hidden_, ffn_, 1.0f, output);
}

// d_stream_ holds d(loss)/d(layer output) on entry and d(loss)/d(layer input) on return.
Status CudaTrainingModel::layer_backward(size_t l, uint32_t rows, const gpu::QkvShape& shape) {
  LayerActivations& s = activations(l);
  const LayerOffsets& o = layout_.layers()[l];
  float* partials = partials_.get();
  // Feed-forward: gate_up becomes its own gradient and d_act_ the down projection's input.
  KIPP_RETURN_IF_ERROR(to_bf16(d_stream_.get(), rows * hidden_, d_bf16_.get()));
  KIPP_RETURN_IF_ERROR(gemm_->dy_w(d_bf16_.get(), weight(o.down_proj), rows, hidden_, ffn_, 0.0f, d_act_.get()));
  KIPP_RETURN_IF_ERROR(
      cuda_ok(gpu::swiglu_backward(s.gate_up.get(), d_act_.get(), rows, uint32_t(ffn_), stream_), "swiglu backward"));
  KIPP_RETURN_IF_ERROR(to_bf16(d_act_.get(), rows * ffn_, act_bf16_.get()));
  KIPP_RETURN_IF_ERROR(gemm_->dyt_x(d_bf16_.get(), act_bf16_.get(), rows, hidden_, ffn_, grad(o.down_proj)));
  KIPP_RETURN_IF_ERROR(to_bf16(s.gate_up.get(), rows * 2 * ffn_, d_bf16_.get()));
  KIPP_RETURN_IF_ERROR(gemm_->dy_w(d_bf16_.get(), weight(o.gate_proj), rows, 2 * ffn_, hidden_, 0.0f, d_normed_.get()));
  KIPP_RETURN_IF_ERROR(gemm_->dyt_x(d_bf16_.get(), s.ffn_normed.get(), rows, 2 * ffn_, hidden_, grad(o.gate_proj)));
  KIPP_RETURN_IF_ERROR(copy(d_mid_.get(), d_stream_.get(), rows * hidden_));
  KIPP_RETURN_IF_ERROR(
      cuda_ok(gpu::rmsnorm_backward(d_normed_.get(), s.mid.get(), s.ffn_rstd.get(), param(o.ffn_norm), rows,
                                    uint32_t(hidden_), partials, d_mid_.get(), grad(o.ffn_norm), stream_),
              "feed-forward norm backward"));
  // Attention.
  KIPP_RETURN_IF_ERROR(to_bf16(d_mid_.get(), rows * hidden_, d_bf16_.get()));
  KIPP_RETURN_IF_ERROR(gemm_->dy_w(d_bf16_.get(), weight(o.o_proj), rows, hidden_, q_width_, 0.0f, d_attn_.get()));
  KIPP_RETURN_IF_ERROR(gemm_->dyt_x(d_bf16_.get(), s.attn_out.get(), rows, hidden_, q_width_, grad(o.o_proj)));
  KIPP_RETURN_IF_ERROR(
      cuda_ok(gpu::attention_backward(s.qk.get(), s.qkv.get(), s.attn.get(), s.stats.get(), d_attn_.get(), shape,
                                      row_dots_.get(), d_qk_.get(), d_qkv_.get(), stream_),
              "attention backward"));
  KIPP_RETURN_IF_ERROR(
      cuda_ok(gpu::qk_norm_rope_backward(d_qk_.get(), s.qkv.get(), s.qk_rstd.get(), param(o.q_norm), param(o.k_norm),
                                         shape, rope_cos_.get(), rope_sin_.get(), partials, d_qkv_.get(),
                                         grad(o.q_norm), grad(o.k_norm), stream_),
              "q/k norm and rope backward"));
  KIPP_RETURN_IF_ERROR(to_bf16(d_qkv_.get(), rows * qkv_width_, d_bf16_.get()));
  KIPP_RETURN_IF_ERROR(gemm_->dy_w(d_bf16_.get(), weight(o.q_proj), rows, qkv_width_, hidden_, 0.0f, d_normed_.get()));
  KIPP_RETURN_IF_ERROR(gemm_->dyt_x(d_bf16_.get(), s.attn_normed.get(), rows, qkv_width_, hidden_, grad(o.q_proj)));
  KIPP_RETURN_IF_ERROR(copy(d_stream_.get(), d_mid_.get(), rows * hidden_));
  return cuda_ok(gpu::rmsnorm_backward(d_normed_.get(), layer_inputs_[l].get(), s.attn_rstd.get(), param(o.attn_norm),
                                       rows, uint32_t(hidden_), partials, d_stream_.get(), grad(o.attn_norm), stream_),
                 "attention norm backward");
}

Expected<gpu::QkvShape> CudaTrainingModel::forward_pass(std::span<const float> params, std::span<const int32_t> inputs,
                                                        uint32_t batch, uint32_t seq_len) {
  const uint64_t total = layout_.total();
  if (!params.empty() && params.size() != total)
    return make_error("GPU training: the parameter buffer is not " + std::to_string(total) + " floats");
  if (batch == 0 || batch > options_.max_batch || seq_len == 0 || seq_len > options_.seq_len)
    return make_error("GPU training: batch " + std::to_string(batch) + " x " + std::to_string(seq_len) +
                      " is outside the 1.." + std::to_string(options_.max_batch) + " x 1.." +
                      std::to_string(options_.seq_len) + " it was created for");
  const uint32_t rows = batch * seq_len;
  if (inputs.size() != rows)
    return make_error("GPU training: inputs must hold batch x seq_len = " + std::to_string(rows) + " ids");
  for (uint32_t r = 0; r < rows; ++r) {
    if (inputs[r] < 0 || size_t(inputs[r]) >= vocab_)
      return make_error("GPU training: inputs[" + std::to_string(r) + "] = " + std::to_string(inputs[r]) +
                        " is not a token id (vocab " + std::to_string(vocab_) + ")");
  }
  const gpu::QkvShape shape{.rows = rows,
                            .seq_len = seq_len,
                            .q_heads = config_.num_heads,
                            .kv_heads = config_.num_kv_heads,
                            .head_dim = config_.head_dim};
  if (!params.empty()) {
    KIPP_RETURN_IF_ERROR(upload(params_.get(), params.data(), total * sizeof(float)));
    KIPP_RETURN_IF_ERROR(to_bf16(params_.get(), total, weights_.get()));
  }
  KIPP_RETURN_IF_ERROR(upload(ids_.get(), inputs.data(), rows * sizeof(int32_t)));
  KIPP_RETURN_IF_ERROR(cuda_ok(gpu::embedding_forward(param(layout_.embedding()), ids_.get(), rows, uint32_t(hidden_),
                                                      layer_inputs_[0].get(), stream_),
                               "embedding"));
  KIPP_RETURN_IF_ERROR(forward(rows, shape));
  return shape;
}

Status CudaTrainingModel::logits(std::span<const float> params, std::span<const int32_t> inputs, uint32_t batch,
                                 uint32_t seq_len, std::span<float> out) {
  KIPP_ASSIGN_OR_RETURN(const gpu::QkvShape shape, forward_pass(params, inputs, batch, seq_len));
  if (out.size() != size_t{shape.rows} * vocab_)
    return make_error("GPU training: the logits buffer is not rows x vocab floats");
  std::vector<uint32_t> all(shape.rows);
  for (uint32_t r = 0; r < shape.rows; ++r) all[r] = r;
  KIPP_RETURN_IF_ERROR(upload(counted_rows_.get(), all.data(), all.size() * sizeof(uint32_t)));
  const gpu::HeadScratch scratch{head_input_.get(), head_logits_.get(), head_dlogits_.get(), head_dinput_.get()};
  return gpu::head_logits(*gemm_, final_normed_.get(), counted_rows_.get(), shape.rows, uint32_t(hidden_),
                          uint32_t(vocab_), weight(layout_.head()), scratch, out.data());
}

Expected<LossSums> CudaTrainingModel::run(std::span<const float> params, std::span<const int32_t> inputs,
                                          std::span<const int32_t> targets, uint32_t batch, uint32_t seq_len,
                                          float grad_scale, GradientsTo to, std::span<float> grads) {
  const bool backward = to != GradientsTo::None;
  const uint64_t total = layout_.total();
  if (to == GradientsTo::Host && grads.size() != total)
    return make_error("GPU training: the gradient buffer is not " + std::to_string(total) + " floats");
  if (targets.size() != inputs.size()) return make_error("GPU training: targets and inputs differ in length");
  std::vector<uint32_t> counted;
  std::vector<int32_t> counted_targets;
  for (uint32_t r = 0; r < targets.size(); ++r) {
    if (targets[r] == kIgnoreTarget) continue;
    if (targets[r] < 0 || size_t(targets[r]) >= vocab_)
      return make_error("GPU training: targets[" + std::to_string(r) + "] = " + std::to_string(targets[r]) +
                        " is not a token id (vocab " + std::to_string(vocab_) + ") or " +
                        std::to_string(kIgnoreTarget));
    counted.push_back(r);
    counted_targets.push_back(targets[r]);
  }
  KIPP_ASSIGN_OR_RETURN(const gpu::QkvShape shape, forward_pass(params, inputs, batch, seq_len));
  const uint32_t rows = shape.rows;
  KIPP_ASSIGN_OR_RETURN(const gpu::EmbeddingGradPlan plan, gpu::plan_embedding_grad(inputs, uint32_t(vocab_)));
  KIPP_RETURN_IF_ERROR(upload(counted_rows_.get(), counted.data(), counted.size() * sizeof(uint32_t)));
  KIPP_RETURN_IF_ERROR(
      upload(counted_targets_.get(), counted_targets.data(), counted_targets.size() * sizeof(int32_t)));

  gpu::HeadProblem head;
  head.normed = final_normed_.get();
  head.counted_rows = counted_rows_.get();
  head.targets = counted_targets_.get();
  head.counted = uint32_t(counted.size());
  head.hidden = uint32_t(hidden_);
  head.vocab = uint32_t(vocab_);
  head.weight = weight(layout_.head());
  head.row_loss = row_loss_.get();
  if (to == GradientsTo::Host) KIPP_RETURN_IF_ERROR(clear_gradients());
  if (backward) {
    KIPP_RETURN_IF_ERROR(
        cuda_ok(cudaMemsetAsync(d_normed_.get(), 0, size_t{rows} * hidden_ * sizeof(float), stream_), "clear"));
    head.grad_scale = grad_scale;
    head.weight_grad = grad(layout_.head());
    head.d_normed = d_normed_.get();
  }
  const gpu::HeadScratch scratch{head_input_.get(), head_logits_.get(), head_dlogits_.get(), head_dinput_.get()};
  KIPP_RETURN_IF_ERROR(gpu::head_cross_entropy(*gemm_, head, scratch));

  if (backward) {
    KIPP_RETURN_IF_ERROR(
        cuda_ok(cudaMemsetAsync(d_stream_.get(), 0, size_t{rows} * hidden_ * sizeof(float), stream_), "clear"));
    KIPP_RETURN_IF_ERROR(cuda_ok(
        gpu::rmsnorm_backward(d_normed_.get(), final_x_.get(), final_rstd_.get(), param(layout_.final_norm()), rows,
                              uint32_t(hidden_), partials_.get(), d_stream_.get(), grad(layout_.final_norm()), stream_),
        "final norm backward"));
    for (size_t l = layer_inputs_.size(); l-- > 0;) {
      // The last layer's activations are still those of the forward pass.
      if (options_.recompute_blocks && l + 1 < layer_inputs_.size())
        KIPP_RETURN_IF_ERROR(layer_forward(l, rows, shape, nullptr));
      KIPP_RETURN_IF_ERROR(layer_backward(l, rows, shape));
    }
    KIPP_RETURN_IF_ERROR(upload(plan_ids_.get(), plan.ids.data(), plan.ids.size() * sizeof(int32_t)));
    KIPP_RETURN_IF_ERROR(upload(plan_starts_.get(), plan.starts.data(), plan.starts.size() * sizeof(uint32_t)));
    KIPP_RETURN_IF_ERROR(upload(plan_rows_.get(), plan.rows.data(), plan.rows.size() * sizeof(uint32_t)));
    KIPP_RETURN_IF_ERROR(cuda_ok(
        gpu::embedding_backward(d_stream_.get(), plan_ids_.get(), plan_starts_.get(), plan_rows_.get(),
                                uint32_t(plan.ids.size()), uint32_t(hidden_), grad(layout_.embedding()), stream_),
        "embedding backward"));
  }
  if (to == GradientsTo::Host) {
    host_grads_.resize(total);  // only a pass into the host's gradient needs the staging copy
    KIPP_RETURN_IF_ERROR(cuda_ok(
        cudaMemcpyAsync(host_grads_.data(), grads_.get(), total * sizeof(float), cudaMemcpyDeviceToHost, stream_),
        "gradient download"));
  }
  KIPP_RETURN_IF_ERROR(cuda_ok(cudaMemcpyAsync(host_loss_.data(), row_loss_.get(), counted.size() * sizeof(float),
                                               cudaMemcpyDeviceToHost, stream_),
                               "loss download"));
  KIPP_RETURN_IF_ERROR(cuda_ok(cudaStreamSynchronize(stream_), "step"));
  if (to == GradientsTo::Host) {
    for (uint64_t i = 0; i < total; ++i) grads[i] += host_grads_[i];
  }
  LossSums sums;
  for (size_t i = 0; i < counted.size(); ++i) sums.loss_sum += double(host_loss_[i]);
  sums.counted = counted.size();
  return sums;
}

}  // namespace

Expected<std::unique_ptr<TrainingModel>> create_cuda_training_model(const ParameterLayout& layout,
                                                                    const TrainingModelOptions& options) {
  if (options.max_batch == 0 || options.seq_len == 0) return make_error("GPU training: empty batch shape");
  auto model = std::make_unique<CudaTrainingModel>(layout, options);
  KIPP_RETURN_IF_ERROR(model->allocate());
  return std::unique_ptr<TrainingModel>(std::move(model));
}

}  // namespace kipp::train::cuda
