// Gates of the GPU training kernels (kernels/cuda/train_kernels.h) against the CPU trainer's
// passes (train/adamw.cpp, train/fused_ops.cpp) on random data: AdamW and the device optimizer's
// step bit for bit, the embedding passes bit for bit (the same adds in the same order), the
// global norm and the element-wise passes within a few float roundings (the GPU sums rows in
// another order), every pass run twice to show it is deterministic; then the GPU model's whole
// training step against the CPU model, with recompute_blocks (bitwise the step without), and,
// given the PyTorch reference, against PyTorch autograd:
//   cuda_train_gates [PYTHON TRAIN_REFERENCE_PY SCRATCH_DIR]      (tools/train_reference.py)
// Without a usable GPU it prints SKIPPED and the reason, and exits 77.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "core/half.h"
#include "gate_report.h"
#include "kernels/cuda/train_embedding_plan.h"
#include "kernels/cuda/train_gemm.h"
#include "kernels/cuda/train_head.h"
#include "kernels/cuda/train_kernels.h"
#include "train/adamw.h"
#include "train/cuda/cuda_training_model.h"
#include "train/cuda/decay_runs.h"
#include "train/device_optimizer.h"
#include "train/fused_ops.h"
#include "train/parameters.h"
#include "train/training_model.h"
#include "train_reference_run.h"

namespace {

using kipp::Status;
using kipp::gates::ReferenceTools;
using kipp::gates::report;
using kipp::gates::scientific;
namespace ops = kipp::train::ops;
namespace gpu = kipp::cuda::train;

// A CUDA call that fails ends the program: the gates after it would only report its echo.
void check(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return;
  std::printf("FAIL  %s: %s\n", call, cudaGetErrorString(error));
  std::exit(1);
}
#define CUDA_CHECK(call) check((call), #call)

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(1, count) * sizeof(T)));
  }
  explicit DeviceArray(const std::vector<T>& values) : DeviceArray(values.size()) { upload(values); }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() { return data_; }
  void upload(const std::vector<T>& values) {
    CUDA_CHECK(cudaMemcpy(data_, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> values(count_);
    CUDA_CHECK(cudaMemcpy(values.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return values;
  }

 private:
  T* data_ = nullptr;
  size_t count_;
};

std::vector<float> random_values(size_t count, uint32_t seed, float stddev) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> values(count);
  for (float& value : values) value = normal(generator);
  return values;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// max |a - e| / max |e|: the error relative to the tensor's scale.
double relative_error(const std::vector<float>& actual, const std::vector<float>& expected) {
  double error = 0, scale = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    error = std::max(error, std::fabs(double(actual[i]) - double(expected[i])));
    scale = std::max(scale, std::fabs(double(expected[i])));
  }
  return scale > 0 ? error / scale : error;
}

// One gate: within `tolerance` of the CPU, and bitwise equal to a second run.
void gate_close(const std::string& what, const std::vector<float>& gpu_first, const std::vector<float>& gpu_second,
                const std::vector<float>& cpu, double tolerance) {
  const double error = relative_error(gpu_first, cpu);
  report(error <= tolerance, what + " vs CPU",
         "max error / max |cpu| " + scientific(error) + " (limit " + scientific(tolerance) + ")");
  report(same_bits(gpu_first, gpu_second), what + " deterministic", "two runs bitwise equal");
}

void gate_adamw() {
  using kipp::train::ParamKind;
  const std::vector<kipp::train::ParamTensor> tensors = {
      {.name = "embed", .shape = {300000}, .offset = 0, .count = 300000, .kind = ParamKind::Embedding},
      {.name = "norm", .shape = {1024}, .offset = 300000, .count = 1024, .kind = ParamKind::Norm},
      {.name = "proj", .shape = {700001}, .offset = 301024, .count = 700001, .kind = ParamKind::Projection},
      {.name = "norm2", .shape = {1024}, .offset = 1001025, .count = 1024, .kind = ParamKind::Norm},
      {.name = "head", .shape = {200000}, .offset = 1002049, .count = 200000, .kind = ParamKind::Head}};
  const size_t total = 1202049;
  kipp::train::AdamWOptions options;
  options.weight_decay = 0.1;
  kipp::train::AdamW cpu(tensors, options);
  std::vector<float> cpu_params = random_values(total, 1, 0.02f);
  DeviceArray<float> params(cpu_params), grads(total), m(std::vector<float>(total, 0.0f)),
      v(std::vector<float>(total, 0.0f));
  const std::vector<gpu::DecayRun> runs = kipp::train::cuda::decay_runs(cpu.decay_ranges());
  uint64_t longest = 0;
  for (const gpu::DecayRun& run : runs) longest = std::max(longest, run.count);
  DeviceArray<gpu::DecayRun> device_runs(runs);
  bool same = true;
  for (uint64_t step = 1; step <= 3; ++step) {
    const std::vector<float> g = random_values(total, uint32_t(100 + step), 0.01f);
    const double lr = 3e-4 * double(step);
    cpu.step(cpu_params, g, lr);
    grads.upload(g);
    const gpu::AdamWScalars s =
        gpu::adamw_scalars(options.beta1, options.beta2, options.eps, options.weight_decay, lr, step);
    CUDA_CHECK(gpu::adamw_step(params.get(), grads.get(), m.get(), v.get(), device_runs.get(), uint32_t(runs.size()),
                               longest, s, nullptr));
    const std::vector<float> moments(cpu.first_moment().begin(), cpu.first_moment().end());
    const std::vector<float> seconds(cpu.second_moment().begin(), cpu.second_moment().end());
    same = same && same_bits(params.download(), cpu_params) && same_bits(m.download(), moments) &&
           same_bits(v.download(), seconds);
  }
  report(same, "adamw", "parameters and both moments bitwise the CPU's after 3 steps of 1.2M elements");
}

void gate_norm_and_scale() {
  const size_t count = 3000017;
  std::vector<float> g = random_values(count, 2, 0.5f);
  DeviceArray<float> x(g);
  DeviceArray<double> partials(gpu::kNormBlocks), total(1);
  CUDA_CHECK(gpu::sum_of_squares(x.get(), count, partials.get(), total.get(), nullptr));
  const double first = std::sqrt(total.download()[0]);
  CUDA_CHECK(gpu::sum_of_squares(x.get(), count, partials.get(), total.get(), nullptr));
  const double second = std::sqrt(total.download()[0]);
  const double cpu = kipp::train::gradient_norm(g);
  report(std::fabs(first - cpu) <= 1e-12 * cpu && first == second, "global norm",
         "relative difference " + scientific(std::fabs(first - cpu) / cpu) + " (limit 1e-12), two runs equal");

  g[count / 2] = std::numeric_limits<float>::quiet_NaN();
  x.upload(g);
  CUDA_CHECK(gpu::sum_of_squares(x.get(), count, partials.get(), total.get(), nullptr));
  report(!std::isfinite(total.download()[0]), "global norm of a NaN gradient", "not finite");

  std::vector<float> clean = random_values(count, 3, 1.0f);
  x.upload(clean);
  CUDA_CHECK(gpu::scale(x.get(), count, 0.37f, nullptr));
  kipp::train::scale_gradients(clean, 0.37f);
  report(same_bits(x.download(), clean), "scale", "bitwise the CPU's");

  DeviceArray<__nv_bfloat16> rounded(count);
  CUDA_CHECK(gpu::round_to_bf16(x.get(), count, rounded.get(), nullptr));
  const std::vector<__nv_bfloat16> bf16 = rounded.download();
  bool exact = true;
  for (size_t i = 0; i < count && exact; ++i) {
    const __nv_bfloat16_raw raw(bf16[i]);
    exact = raw.x == kipp::f32_to_bf16(clean[i]);
  }
  report(exact, "round to bf16", "every value as core/half.h rounds it (nearest even)");
}

void gate_rmsnorm() {
  const uint32_t rows = 300, width = 1024;
  const float eps = 1e-6f;
  const std::vector<float> x = random_values(size_t(rows) * width, 4, 2.0f);
  const std::vector<float> gain = random_values(width, 5, 1.0f);
  const std::vector<float> dy = random_values(size_t(rows) * width, 6, 1.0f);
  const std::vector<float> dx0 = random_values(size_t(rows) * width, 7, 0.1f);
  const std::vector<float> dgain0 = random_values(width, 8, 0.1f);

  std::vector<float> rstd(rows), y(x.size()), partials(ops::reduction_partials(rows, width));
  ops::rmsnorm_forward(x.data(), gain.data(), rows, width, eps, rstd.data(), y.data());
  std::vector<float> dx = dx0, dgain = dgain0;
  ops::rmsnorm_backward(dy.data(), x.data(), rstd.data(), gain.data(), rows, width, partials.data(), dx.data(),
                        dgain.data());

  DeviceArray<float> d_x(x), d_gain(gain), d_dy(dy), d_rstd(rows), d_y(x.size()),
      d_partials(gpu::gain_partials(rows, width)), d_dx(dx0), d_dgain(dgain0);
  std::vector<float> runs[2][4];
  for (auto& run : runs) {
    d_dx.upload(dx0);
    d_dgain.upload(dgain0);
    CUDA_CHECK(gpu::rmsnorm_forward(d_x.get(), d_gain.get(), rows, width, eps, d_rstd.get(), d_y.get(), nullptr));
    CUDA_CHECK(gpu::rmsnorm_backward(d_dy.get(), d_x.get(), d_rstd.get(), d_gain.get(), rows, width, d_partials.get(),
                                     d_dx.get(), d_dgain.get(), nullptr));
    run[0] = d_rstd.download();
    run[1] = d_y.download();
    run[2] = d_dx.download();
    run[3] = d_dgain.download();
  }
  gate_close("rmsnorm rstd", runs[0][0], runs[1][0], rstd, 1e-6);
  gate_close("rmsnorm y", runs[0][1], runs[1][1], y, 1e-6);
  gate_close("rmsnorm dx", runs[0][2], runs[1][2], dx, 1e-5);
  gate_close("rmsnorm dgain", runs[0][3], runs[1][3], dgain, 1e-5);
}

void gate_qk_norm_rope() {
  const ops::HeadShape shape{.batch = 2, .seq_len = 96, .q_heads = 8, .kv_heads = 2, .head_dim = 128};
  const gpu::QkvShape gshape{.rows = uint32_t(shape.rows()),
                             .seq_len = uint32_t(shape.seq_len),
                             .q_heads = uint32_t(shape.q_heads),
                             .kv_heads = uint32_t(shape.kv_heads),
                             .head_dim = uint32_t(shape.head_dim)};
  const float eps = 1e-6f;
  const size_t half = shape.head_dim / 2, heads = shape.q_heads + shape.kv_heads;
  std::vector<float> cos(shape.seq_len * half), sin(shape.seq_len * half);
  for (size_t p = 0; p < shape.seq_len; ++p) {
    for (size_t i = 0; i < half; ++i) {
      const double angle = double(p) * std::pow(1e6, -2.0 * double(i) / double(shape.head_dim));
      cos[p * half + i] = float(std::cos(angle));
      sin[p * half + i] = float(std::sin(angle));
    }
  }
  const std::vector<float> qkv = random_values(shape.rows() * shape.qkv_width(), 9, 1.5f);
  const std::vector<float> q_gain = random_values(shape.head_dim, 10, 1.0f);
  const std::vector<float> k_gain = random_values(shape.head_dim, 11, 1.0f);
  const std::vector<float> dqk = random_values(shape.rows() * shape.qk_width(), 12, 1.0f);
  const std::vector<float> gain_grad0 = random_values(shape.head_dim, 13, 0.1f);

  std::vector<float> rstd(shape.rows() * heads), qk(shape.rows() * shape.qk_width());
  ops::qk_norm_rope_forward(qkv.data(), q_gain.data(), k_gain.data(), shape, {cos.data(), sin.data()}, eps, rstd.data(),
                            qk.data());
  // Only the Q and K columns of dqkv are written: V's stay as they were, zero here.
  std::vector<float> dqkv(qkv.size(), 0.0f), dq_gain = gain_grad0, dk_gain = gain_grad0;
  std::vector<float> partials(ops::reduction_partials(shape.rows(), 2 * shape.head_dim));
  ops::qk_norm_rope_backward(dqk.data(), qkv.data(), rstd.data(), q_gain.data(), k_gain.data(), shape,
                             {cos.data(), sin.data()}, partials.data(), dqkv.data(), dq_gain.data(), dk_gain.data());

  DeviceArray<float> d_qkv(qkv), d_q_gain(q_gain), d_k_gain(k_gain), d_cos(cos), d_sin(sin), d_rstd(rstd.size()),
      d_qk(qk.size()), d_dqk(dqk), d_dqkv(dqkv.size()), d_dq_gain(gain_grad0), d_dk_gain(gain_grad0),
      d_partials(gpu::gain_partials(gshape.rows, 2 * gshape.head_dim));
  std::vector<float> runs[2][5];
  for (auto& run : runs) {
    d_dqkv.upload(std::vector<float>(dqkv.size(), 0.0f));
    d_dq_gain.upload(gain_grad0);
    d_dk_gain.upload(gain_grad0);
    CUDA_CHECK(gpu::qk_norm_rope_forward(d_qkv.get(), d_q_gain.get(), d_k_gain.get(), gshape, d_cos.get(), d_sin.get(),
                                         eps, d_rstd.get(), d_qk.get(), nullptr));
    CUDA_CHECK(gpu::qk_norm_rope_backward(d_dqk.get(), d_qkv.get(), d_rstd.get(), d_q_gain.get(), d_k_gain.get(),
                                          gshape, d_cos.get(), d_sin.get(), d_partials.get(), d_dqkv.get(),
                                          d_dq_gain.get(), d_dk_gain.get(), nullptr));
    run[0] = d_rstd.download();
    run[1] = d_qk.download();
    run[2] = d_dqkv.download();
    run[3] = d_dq_gain.download();
    run[4] = d_dk_gain.download();
  }
  gate_close("qk norm+rope rstd", runs[0][0], runs[1][0], rstd, 1e-6);
  gate_close("qk norm+rope output", runs[0][1], runs[1][1], qk, 1e-6);
  gate_close("qk norm+rope dqkv", runs[0][2], runs[1][2], dqkv, 1e-5);
  gate_close("qk norm+rope dq_gain", runs[0][3], runs[1][3], dq_gain, 1e-5);
  gate_close("qk norm+rope dk_gain", runs[0][4], runs[1][4], dk_gain, 1e-5);
}

void gate_swiglu() {
  const uint32_t rows = 257, width = 3072;
  const std::vector<float> gate_up = random_values(size_t(rows) * 2 * width, 14, 3.0f);
  const std::vector<float> dact = random_values(size_t(rows) * width, 15, 1.0f);
  std::vector<float> act(dact.size()), grad = gate_up, act_grad = dact;
  ops::swiglu_forward(gate_up.data(), rows, width, act.data());
  ops::swiglu_backward(grad.data(), act_grad.data(), rows, width);

  DeviceArray<float> d_gate_up(gate_up), d_act(act.size()), d_act_grad(dact);
  std::vector<float> runs[2][3];
  for (auto& run : runs) {
    d_gate_up.upload(gate_up);
    d_act_grad.upload(dact);
    CUDA_CHECK(gpu::swiglu_forward(d_gate_up.get(), rows, width, d_act.get(), nullptr));
    CUDA_CHECK(gpu::swiglu_backward(d_gate_up.get(), d_act_grad.get(), rows, width, nullptr));
    run[0] = d_act.download();
    run[1] = d_gate_up.download();
    run[2] = d_act_grad.download();
  }
  gate_close("swiglu act", runs[0][0], runs[1][0], act, 1e-6);
  gate_close("swiglu d(gate, up)", runs[0][1], runs[1][1], grad, 1e-6);
  gate_close("swiglu recomputed act", runs[0][2], runs[1][2], act_grad, 1e-6);
}

void gate_embedding() {
  const uint32_t vocab = 5000, width = 320, rows = 4096;
  std::mt19937 generator(16);
  std::vector<int32_t> ids(rows);
  // Few distinct ids, so most rows share theirs with others.
  for (int32_t& id : ids) id = int32_t(generator() % 97u) * 41;
  const std::vector<float> table = random_values(size_t(vocab) * width, 17, 0.02f);
  const std::vector<float> dx = random_values(size_t(rows) * width, 18, 1.0f);
  std::vector<float> out(size_t(rows) * width), dtable = table;
  ops::embedding_forward(table.data(), ids.data(), rows, width, out.data());
  ops::embedding_backward(dx.data(), ids.data(), rows, width, dtable.data());

  auto plan = kipp::cuda::train::plan_embedding_grad(ids, vocab);
  if (!plan) {
    report(false, "embedding plan", plan.message());
    return;
  }
  DeviceArray<float> d_table(table), d_out(out.size()), d_dx(dx);
  DeviceArray<int32_t> d_ids(ids), d_plan_ids(plan->ids);
  DeviceArray<uint32_t> d_starts(plan->starts), d_rows(plan->rows);
  CUDA_CHECK(gpu::embedding_forward(d_table.get(), d_ids.get(), rows, width, d_out.get(), nullptr));
  report(same_bits(d_out.download(), out), "embedding forward", "bitwise the CPU's");
  CUDA_CHECK(gpu::embedding_backward(d_dx.get(), d_plan_ids.get(), d_starts.get(), d_rows.get(),
                                     uint32_t(plan->ids.size()), width, d_table.get(), nullptr));
  report(same_bits(d_table.download(), dtable), "embedding backward",
         "bitwise the CPU's (each id's rows added in row order, " + std::to_string(plan->ids.size()) + " ids)");
}

// Values rounded to BF16 and back: the head gate's CPU side multiplies exactly the operands the
// GPU's products read.
std::vector<float> bf16_rounded(std::vector<float> values) {
  for (float& value : values) value = kipp::bf16_to_f32(kipp::f32_to_bf16(value));
  return values;
}

std::vector<__nv_bfloat16> bf16_bits(const std::vector<float>& values) {
  std::vector<__nv_bfloat16> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    __nv_bfloat16_raw raw;
    raw.x = kipp::f32_to_bf16(values[i]);
    out[i] = __nv_bfloat16(raw);
  }
  return out;
}

// The three products on random shapes (not multiples of anything) against double sums of the
// same BF16 operands.
void gate_gemm(gpu::TrainGemm& gemm) {
  const size_t m = 77, n = 301, k = 129;
  const std::vector<float> x = bf16_rounded(random_values(m * k, 30, 1.0f));
  const std::vector<float> w = bf16_rounded(random_values(n * k, 31, 1.0f));
  const std::vector<float> dy = bf16_rounded(random_values(m * n, 32, 1.0f));
  const std::vector<float> y0 = random_values(m * n, 33, 1.0f), dw0 = random_values(n * k, 34, 1.0f);
  std::vector<float> y(m * n), dx(m * k), dw(n * k);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double sum = 0.5 * double(y0[i * n + j]);
      for (size_t l = 0; l < k; ++l) sum += double(x[i * k + l]) * double(w[j * k + l]);
      y[i * n + j] = float(sum);
    }
    for (size_t l = 0; l < k; ++l) {
      double sum = 0;
      for (size_t j = 0; j < n; ++j) sum += double(dy[i * n + j]) * double(w[j * k + l]);
      dx[i * k + l] = float(sum);
    }
  }
  for (size_t j = 0; j < n; ++j) {
    for (size_t l = 0; l < k; ++l) {
      double sum = dw0[j * k + l];
      for (size_t i = 0; i < m; ++i) sum += double(dy[i * n + j]) * double(x[i * k + l]);
      dw[j * k + l] = float(sum);
    }
  }
  DeviceArray<__nv_bfloat16> d_x(bf16_bits(x)), d_w(bf16_bits(w)), d_dy(bf16_bits(dy));
  DeviceArray<float> d_y(y0), d_dx(dx.size()), d_dw(dw0);
  const Status done = [&]() -> Status {
    KIPP_RETURN_IF_ERROR(gemm.xwt(d_x.get(), d_w.get(), m, n, k, 0.5f, d_y.get()));
    KIPP_RETURN_IF_ERROR(gemm.dy_w(d_dy.get(), d_w.get(), m, n, k, 0.0f, d_dx.get()));
    return gemm.dyt_x(d_dy.get(), d_x.get(), m, n, k, d_dw.get());
  }();
  if (!done.ok()) {
    report(false, "bf16 products", done.message());
    return;
  }
  const double ey = relative_error(d_y.download(), y), edx = relative_error(d_dx.download(), dx),
               edw = relative_error(d_dw.download(), dw);
  report(std::max({ey, edx, edw}) <= 1e-5, "bf16 products (x w^T + beta y, dy w, dw += dy^T x)",
         "max errors " + scientific(ey) + ", " + scientific(edx) + ", " + scientific(edw) + " (limit 1e-5)");
}

// The fused head + cross-entropy against the CPU's: the same BF16 operands, FP32 logits through
// double sums and ops::cross_entropy, so the loss differs only by sum order and the gradients
// by the logit gradient's BF16 rounding on the GPU.
void gate_head(gpu::TrainGemm& gemm) {
  const uint32_t rows = 600, hidden = 256, vocab = 5003;
  std::vector<uint32_t> counted;
  for (uint32_t r = 0; r < rows; ++r) {
    if (r % 7 != 3) counted.push_back(r);  // masked rows carry no loss
  }
  const uint32_t n = uint32_t(counted.size());
  std::mt19937 generator(40);
  std::vector<int32_t> targets(n);
  for (int32_t& t : targets) t = int32_t(generator() % vocab);
  const std::vector<float> normed = bf16_rounded(random_values(size_t(rows) * hidden, 41, 1.0f));
  const std::vector<float> weight = bf16_rounded(random_values(size_t(vocab) * hidden, 42, 0.05f));
  const float grad_scale = 1.0f / float(n);

  std::vector<float> logits(size_t(n) * vocab), loss(n);
  for (uint32_t i = 0; i < n; ++i) {
    const float* x = normed.data() + size_t(counted[i]) * hidden;
    for (uint32_t v = 0; v < vocab; ++v) {
      double sum = 0;
      for (uint32_t l = 0; l < hidden; ++l) sum += double(x[l]) * double(weight[size_t(v) * hidden + l]);
      logits[size_t(i) * vocab + v] = float(sum);
    }
  }
  ops::cross_entropy(logits.data(), targets.data(), n, vocab, true, grad_scale, loss.data());
  std::vector<float> d_normed(size_t(rows) * hidden, 0.0f), weight_grad(size_t(vocab) * hidden, 0.0f);
  for (uint32_t i = 0; i < n; ++i) {
    const float* g = logits.data() + size_t(i) * vocab;
    const float* x = normed.data() + size_t(counted[i]) * hidden;
    for (uint32_t l = 0; l < hidden; ++l) {
      double sum = 0;
      for (uint32_t v = 0; v < vocab; ++v) sum += double(g[v]) * double(weight[size_t(v) * hidden + l]);
      d_normed[size_t(counted[i]) * hidden + l] = float(sum);
    }
    for (uint32_t v = 0; v < vocab; ++v) {
      for (uint32_t l = 0; l < hidden; ++l) weight_grad[size_t(v) * hidden + l] += g[v] * x[l];
    }
  }

  DeviceArray<float> d_in(normed), d_loss(n), d_dnormed(std::vector<float>(d_normed.size(), 0.0f)),
      d_wgrad(std::vector<float>(weight_grad.size(), 0.0f));
  DeviceArray<__nv_bfloat16> d_weight(bf16_bits(weight));
  DeviceArray<uint32_t> d_rows(counted);
  DeviceArray<int32_t> d_targets(targets);
  DeviceArray<__nv_bfloat16> s_input(size_t(gpu::kHeadChunkRows) * hidden),
      s_dlogits(size_t(gpu::kHeadChunkRows) * vocab);
  DeviceArray<float> s_logits(size_t(gpu::kHeadChunkRows) * vocab), s_dinput(size_t(gpu::kHeadChunkRows) * hidden);
  const gpu::HeadScratch scratch{s_input.get(), s_logits.get(), s_dlogits.get(), s_dinput.get()};
  gpu::HeadProblem problem;
  problem.normed = d_in.get();
  problem.counted_rows = d_rows.get();
  problem.targets = d_targets.get();
  problem.counted = n;
  problem.hidden = hidden;
  problem.vocab = vocab;
  problem.weight = d_weight.get();
  problem.row_loss = d_loss.get();
  problem.grad_scale = grad_scale;
  problem.weight_grad = d_wgrad.get();
  problem.d_normed = d_dnormed.get();
  if (const Status done = gpu::head_cross_entropy(gemm, problem, scratch); !done.ok()) {
    report(false, "head + cross-entropy", done.message());
    return;
  }
  const double eloss = relative_error(d_loss.download(), loss);
  report(eloss <= 1e-5, "head + cross-entropy loss vs CPU",
         "max error / max loss " + scientific(eloss) + " (limit 1e-5)");
  const double ex = relative_error(d_dnormed.download(), d_normed),
               ew = relative_error(d_wgrad.download(), weight_grad);
  report(ex <= 1e-2 && ew <= 1e-2, "head + cross-entropy gradients vs CPU",
         "d(input) " + scientific(ex) + ", d(weight) " + scientific(ew) + " (limit 1e-2: BF16 logit gradients)");
}

void gate_attention() {
  const ops::HeadShape shape{.batch = 2, .seq_len = 200, .q_heads = 8, .kv_heads = 2, .head_dim = 64};
  const gpu::QkvShape gshape{.rows = uint32_t(shape.rows()),
                             .seq_len = uint32_t(shape.seq_len),
                             .q_heads = uint32_t(shape.q_heads),
                             .kv_heads = uint32_t(shape.kv_heads),
                             .head_dim = uint32_t(shape.head_dim)};
  const std::vector<float> qk = random_values(shape.rows() * shape.qk_width(), 50, 1.0f);
  const std::vector<float> qkv = random_values(shape.rows() * shape.qkv_width(), 51, 1.0f);
  const std::vector<float> dout = random_values(shape.rows() * shape.q_width(), 52, 1.0f);
  std::vector<float> scratch(ops::attention_scratch(shape.seq_len)), stats(shape.rows() * shape.q_heads * 2),
      out(shape.rows() * shape.q_width());
  ops::attention_forward(qk.data(), qkv.data(), shape, scratch.data(), 1, stats.data(), out.data());
  std::vector<float> dqk(qk.size(), 0.0f), dqkv(qkv.size(), 0.0f), dk_heads(out.size()), dv_heads(out.size());
  ops::attention_backward(qk.data(), qkv.data(), stats.data(), dout.data(), shape, scratch.data(), 1, dqk.data(),
                          dk_heads.data(), dv_heads.data());
  ops::reduce_kv_heads(dk_heads.data(), shape, shape.qk_width(), dqk.data() + shape.q_width());
  ops::reduce_kv_heads(dv_heads.data(), shape, shape.qkv_width(), dqkv.data() + shape.qk_width());

  DeviceArray<float> d_qk(qk), d_qkv(qkv), d_dout(dout), d_stats(stats.size()), d_out(out.size()),
      d_dots(shape.rows() * shape.q_heads), d_dqk(dqk.size()), d_dqkv(dqkv.size());
  std::vector<float> runs[2][4];
  for (auto& run : runs) {
    d_dqk.upload(std::vector<float>(dqk.size(), 0.0f));
    d_dqkv.upload(std::vector<float>(dqkv.size(), 0.0f));
    CUDA_CHECK(gpu::attention_forward(d_qk.get(), d_qkv.get(), gshape, d_stats.get(), d_out.get(), nullptr));
    CUDA_CHECK(gpu::attention_backward(d_qk.get(), d_qkv.get(), d_out.get(), d_stats.get(), d_dout.get(), gshape,
                                       d_dots.get(), d_dqk.get(), d_dqkv.get(), nullptr));
    run[0] = d_out.download();
    run[1] = d_stats.download();
    run[2] = d_dqk.download();
    run[3] = d_dqkv.download();
  }
  gate_close("attention output", runs[0][0], runs[1][0], out, 1e-5);
  gate_close("attention softmax stats", runs[0][1], runs[1][1], stats, 1e-5);
  gate_close("attention dq, dk", runs[0][2], runs[1][2], dqk, 1e-4);
  gate_close("attention dv", runs[0][3], runs[1][3], dqkv, 1e-4);
}

// A small model's initial parameters and one batch of tokens, some targets masked.
struct SmallProblem {
  kipp::train::ParameterLayout layout;
  std::vector<float> params;
  std::vector<int32_t> inputs, targets;
  uint64_t counted = 0;
  static constexpr uint32_t batch = 2, seq_len = 128;

  kipp::train::TokenBatch tokens() const {
    return {.inputs = inputs, .targets = targets, .batch = batch, .seq_len = seq_len, .noise_key = 0};
  }
  kipp::train::TrainingModelOptions options(bool recompute = false) const {
    return {.max_batch = batch,
            .seq_len = seq_len,
            .recompute_blocks = recompute,
            .precision = kipp::train::Precision::Fp32};
  }
};

SmallProblem small_problem(bool tied) {
  using namespace kipp::train;
  const kipp::ModelConfig config{.hidden_size = 256,
                                 .num_layers = 2,
                                 .num_heads = 4,
                                 .num_kv_heads = 2,
                                 .head_dim = 64,
                                 .ffn_size = 512,
                                 .vocab_size = 1000,
                                 .context_length = 128,
                                 .rope_theta = 10000.0,
                                 .rms_norm_eps = 1e-6,
                                 .tie_embeddings = tied};
  SmallProblem problem{.layout = ParameterLayout(config), .params = {}, .inputs = {}, .targets = {}};
  const ParameterLayout& layout = problem.layout;
  std::vector<float>& params = problem.params;
  params.resize(layout.total());
  init_parameters(layout, InitOptions{.seed = 7, .std = 0.02, .scaled_residual = false}, params);
  // Norm gains away from 1, so their gradients are not all alike.
  const std::vector<float> jitter = random_values(params.size(), 60, 0.1f);
  for (const ParamTensor& t : layout.tensors()) {
    if (t.kind != ParamKind::Norm) continue;
    for (uint64_t i = t.offset; i < t.offset + t.count; ++i) params[i] += jitter[i];
  }
  std::mt19937 generator(61);
  problem.inputs.resize(SmallProblem::batch * SmallProblem::seq_len);
  problem.targets.resize(problem.inputs.size());
  for (size_t i = 0; i < problem.inputs.size(); ++i) {
    problem.inputs[i] = int32_t(generator() % config.vocab_size);
    problem.targets[i] = i % 9 == 4 ? kIgnoreTarget : int32_t(generator() % config.vocab_size);
    problem.counted += problem.targets[i] != kIgnoreTarget;
  }
  return problem;
}

// How far a gradient is from an expected one, tensor by tensor: the worst relative error
// (|g - e| / |e| in the L2 norm) and the worst cosine.
struct GradientAgreement {
  double worst_error = 0, worst_cosine = 1;
  std::string error_name = "(none)", cosine_name = "(none)";
};

GradientAgreement gradient_agreement(const kipp::train::ParameterLayout& layout, const std::vector<float>& actual,
                                     const std::vector<float>& expected) {
  GradientAgreement agreement;
  for (const kipp::train::ParamTensor& t : layout.tensors()) {
    double diff = 0, norm = 0, dot = 0, actual_norm = 0;
    for (uint64_t i = t.offset; i < t.offset + t.count; ++i) {
      const double a = actual[i], e = expected[i];
      diff += (a - e) * (a - e);
      norm += e * e;
      actual_norm += a * a;
      dot += a * e;
    }
    const double error = std::sqrt(diff / std::max(norm, 1e-300));
    const double cosine = dot / std::max(std::sqrt(norm * actual_norm), 1e-300);
    // Written so that a NaN counts as the worst.
    if (!(error <= agreement.worst_error)) agreement.worst_error = error, agreement.error_name = t.name;
    if (!(cosine >= agreement.worst_cosine)) agreement.worst_cosine = cosine, agreement.cosine_name = t.name;
  }
  return agreement;
}

// The bounds BF16 operands allow: relative error 2e-2 and cosine 0.999 for every tensor, the
// relative bound the CPU trainer's own BF16 products are held to against FP32. The attention
// projections' gradients pass through the softmax backward, which subtracts nearly equal terms,
// so the operands' rounding reaches them amplified beyond 1e-2 on the CPU's BF16 path too.
void report_gradients(const std::string& what, const GradientAgreement& a) {
  report(a.worst_error <= 2e-2 && a.worst_cosine >= 0.999, what,
         "worst relative error " + scientific(a.worst_error) + " (" + a.error_name + "), worst cosine " +
             std::to_string(a.worst_cosine) + " (" + a.cosine_name + "); limits 2e-2 and 0.999");
}

// One forward and backward of a small model on the GPU (BF16 operands, FP32 sums) against the
// CPU model in FP32 from the same parameters and batch: the loss, and every parameter tensor's
// gradient within relative error 2e-2 (|g_gpu - g_cpu| / |g_cpu|) and cosine 0.999; a second
// GPU pass gives bitwise the same gradients.
void gate_training_step(bool tied) {
  using namespace kipp::train;
  const SmallProblem problem = small_problem(tied);
  const ParameterLayout& layout = problem.layout;
  const std::vector<float>& params = problem.params;
  const TokenBatch tokens = problem.tokens();
  const TrainingModelOptions options = problem.options();
  const uint64_t counted = problem.counted;
  const std::string what = std::string("training step (") + (tied ? "tied" : "untied") + " head)";
  auto cpu = TrainingModel::create(layout, options);
  auto gpu_model = kipp::train::cuda::create_cuda_training_model(layout, options);
  if (!cpu || !gpu_model) {
    report(false, what, !cpu ? cpu.message() : gpu_model.message());
    return;
  }
  const float grad_scale = 1.0f / float(counted);
  std::vector<float> cpu_grads(params.size(), 0.0f), gpu_grads(params.size(), 0.0f), again(params.size(), 0.0f);
  auto cpu_loss = (*cpu)->forward_backward(params, tokens, grad_scale, cpu_grads);
  auto gpu_loss = (*gpu_model)->forward_backward(params, tokens, grad_scale, gpu_grads);
  auto gpu_again = (*gpu_model)->forward_backward(params, tokens, grad_scale, again);
  if (!cpu_loss || !gpu_loss || !gpu_again) {
    report(false, what, !cpu_loss ? cpu_loss.message() : !gpu_loss ? gpu_loss.message() : gpu_again.message());
    return;
  }
  const double loss_error = std::fabs(gpu_loss->loss_sum - cpu_loss->loss_sum) / std::fabs(cpu_loss->loss_sum);
  report(loss_error <= 1e-3 && gpu_loss->counted == cpu_loss->counted, what + " loss vs CPU",
         "relative difference " + scientific(loss_error) + " (limit 1e-3)");
  report_gradients(what + " gradients vs CPU FP32, every tensor", gradient_agreement(layout, gpu_grads, cpu_grads));
  report(same_bits(gpu_grads, again), what + " deterministic", "two GPU passes give bitwise the same gradients");
}

// recompute_blocks rebuilds each layer's activations before its backward pass with the same
// kernels: the loss and every gradient bitwise those of the pass that kept them, in less memory.
void gate_recompute() {
  using namespace kipp::train;
  const std::string what = "recompute_blocks";
  const SmallProblem problem = small_problem(false);
  auto kept = kipp::train::cuda::create_cuda_training_model(problem.layout, problem.options(false));
  auto recomputed = kipp::train::cuda::create_cuda_training_model(problem.layout, problem.options(true));
  if (!kept || !recomputed) {
    report(false, what, !kept ? kept.message() : recomputed.message());
    return;
  }
  const float grad_scale = 1.0f / float(problem.counted);
  std::vector<float> kept_grads(problem.params.size(), 0.0f), recomputed_grads(problem.params.size(), 0.0f);
  auto kept_loss = (*kept)->forward_backward(problem.params, problem.tokens(), grad_scale, kept_grads);
  auto recomputed_loss =
      (*recomputed)->forward_backward(problem.params, problem.tokens(), grad_scale, recomputed_grads);
  if (!kept_loss || !recomputed_loss) {
    report(false, what, !kept_loss ? kept_loss.message() : recomputed_loss.message());
    return;
  }
  report(kept_loss->loss_sum == recomputed_loss->loss_sum && same_bits(kept_grads, recomputed_grads), what + " bitwise",
         "the loss and every gradient equal to the pass that keeps every layer's activations");
  const uint64_t kept_bytes = (*kept)->workspace_bytes(), recomputed_bytes = (*recomputed)->workspace_bytes();
  report(recomputed_bytes < kept_bytes, what + " workspace",
         std::to_string(recomputed_bytes) + " bytes against " + std::to_string(kept_bytes) + " keeping every layer's");
}

// The GPU model's loss and gradients of one micro-batch against PyTorch autograd in FP32
// (tools/train_reference.py grad: the summed loss's gradient, so the GPU pass is unscaled), within
// the bounds of the CPU comparison.
void gate_torch_gradients(const ReferenceTools& tools, bool tied) {
  using namespace kipp::train;
  const std::string what = std::string("training step (") + (tied ? "tied" : "untied") + " head) vs PyTorch";
  const SmallProblem problem = small_problem(tied);
  const ParameterLayout& layout = problem.layout;
  const std::filesystem::path dir = tools.scratch / (tied ? "torch-tied" : "torch-untied");
  const std::string batch_path = (dir / "batch.safetensors").string(), out_path = (dir / "grads.safetensors").string();
  Status written = kipp::gates::write_reference_model(dir, layout, problem.params);
  if (written.ok())
    written = kipp::gates::write_token_batch(batch_path, problem.inputs, problem.targets,
                                             {SmallProblem::batch, SmallProblem::seq_len});
  if (!written.ok()) {
    report(false, what, written.message());
    return;
  }
  if (!kipp::gates::run_train_reference(tools, "grad --config '" + (dir / "config.json").string() + "' --weights '" +
                                                   (dir / "weights.safetensors").string() + "' --batch '" + batch_path +
                                                   "' --out '" + out_path + "'"))
    return;
  auto reference = kipp::SafetensorsFile::open(out_path);
  if (!reference) {
    report(false, what, reference.message());
    return;
  }
  std::vector<float> expected(layout.total());
  for (const ParamTensor& t : layout.tensors()) {
    const kipp::SafetensorsTensor* tensor = reference->find(t.name);
    if (!tensor || tensor->dtype != kipp::SafetensorsDtype::F32 || tensor->shape != t.shape) {
      report(false, what, "the reference lacks an F32 tensor " + t.name + " of the layout's shape");
      return;
    }
    std::memcpy(expected.data() + t.offset, reference->data(*tensor).data(), t.count * sizeof(float));
  }
  auto gpu_model = kipp::train::cuda::create_cuda_training_model(layout, problem.options());
  if (!gpu_model) {
    report(false, what, gpu_model.message());
    return;
  }
  std::vector<float> grads(layout.total(), 0.0f);
  auto loss = (*gpu_model)->forward_backward(problem.params, problem.tokens(), 1.0f, grads);
  if (!loss) {
    report(false, what, loss.message());
    return;
  }
  const double torch_loss = std::stod(reference->metadata().at("loss_sum"));
  const uint64_t torch_counted = std::stoull(reference->metadata().at("counted"));
  const double loss_error = std::fabs(loss->loss_sum - torch_loss) / std::fabs(torch_loss);
  report(loss_error <= 1e-3 && loss->counted == torch_counted, what + " loss",
         "relative difference " + scientific(loss_error) + " (limit 1e-3)");
  report_gradients(what + " autograd gradients, every tensor", gradient_agreement(layout, grads, expected));
}

// The device optimizer (train/device_optimizer.h) from the same state as the host's AdamW, on
// the gradient one GPU pass gives both: the norm within 1e-12 of gradient_norm's, then a clip by
// 1/2 and one AdamW update leave parameters and moments bitwise the host's; a pass on the
// resident updated parameters gives bitwise the loss of a pass from the host's copy.
void gate_device_optimizer() {
  using namespace kipp::train;
  const std::string what = "device optimizer";
  SmallProblem problem = small_problem(false);
  const TokenBatch tokens = problem.tokens();
  auto made = kipp::train::cuda::create_cuda_training_model(problem.layout, problem.options());
  if (!made) {
    report(false, what, made.message());
    return;
  }
  TrainingModel& model = **made;
  DeviceOptimizer* device = model.device_optimizer();
  if (!device) {
    report(false, what, "the GPU model has no device optimizer");
    return;
  }
  // A mid-run state: moments away from zero (the second positive) and 4 updates taken.
  AdamWOptions options;
  options.weight_decay = 0.1;
  AdamW host(problem.layout.tensors(), options);
  const uint64_t total = problem.layout.total();
  const std::vector<float> m0 = random_values(total, 70, 1e-3f), v0 = random_values(total, 71, 1e-3f);
  for (uint64_t i = 0; i < total; ++i) {
    host.first_moment()[i] = m0[i];
    host.second_moment()[i] = v0[i] * v0[i];
  }
  host.set_steps_taken(4);
  const float grad_scale = 1.0f / float(problem.counted);
  std::vector<float> grads(total, 0.0f);
  std::vector<float>& params = problem.params;
  const Status loaded = device->load(params, host);
  auto host_pass = model.forward_backward(params, tokens, grad_scale, grads);
  const Status cleared = device->clear_gradients();
  auto device_pass = device->accumulate(tokens, grad_scale);
  auto device_norm = device->gradient_norm();
  if (!loaded.ok() || !host_pass || !cleared.ok() || !device_pass || !device_norm) {
    report(false, what,
           !loaded.ok()    ? loaded.message()
           : !host_pass    ? host_pass.message()
           : !cleared.ok() ? cleared.message()
           : !device_pass  ? device_pass.message()
                           : device_norm.message());
    return;
  }
  const double host_norm = gradient_norm(grads);
  report(std::fabs(*device_norm - host_norm) <= 1e-12 * host_norm && device_pass->loss_sum == host_pass->loss_sum,
         what + " gradient norm",
         "relative difference " + scientific(std::fabs(*device_norm - host_norm) / host_norm) +
             " (limit 1e-12), the resident pass's loss bitwise the host pass's");

  const double lr = 1e-3;
  scale_gradients(grads, 0.5f);
  host.step(params, grads, lr);
  std::vector<float> stored(total), stored_m(total), stored_v(total);
  AdamW from_device(problem.layout.tensors(), options);
  const Status scaled = device->scale_gradients(0.5f);
  const Status stepped = scaled.ok() ? device->step(lr, host.steps_taken()) : scaled;
  const Status stored_ok = stepped.ok() ? device->store(stored, from_device) : stepped;
  if (!stored_ok.ok()) {
    report(false, what + " step", stored_ok.message());
    return;
  }
  const auto as_vector = [](std::span<const float> x) { return std::vector<float>(x.begin(), x.end()); };
  report(same_bits(stored, params) &&
             same_bits(as_vector(from_device.first_moment()), as_vector(host.first_moment())) &&
             same_bits(as_vector(from_device.second_moment()), as_vector(host.second_moment())),
         what + " step vs host AdamW", "clip by 1/2 and update 5: parameters and both moments bitwise the host's");

  // A resident pass reads the updated parameters' BF16 copies, as a pass from the stored ones does.
  const Status cleared_again = device->clear_gradients();
  auto after_device = device->accumulate(tokens, grad_scale);
  auto after_host = model.evaluate(stored, tokens);
  report(cleared_again.ok() && after_device && after_host && after_host->loss_sum == after_device->loss_sum,
         what + " after the step", "a resident pass's loss bitwise a pass from the stored parameters");
}

}  // namespace

// With --probe only the device check runs (exit 0 with a GPU, 77 without), so a test that
// needs a GPU for something else can skip the same way.
int main(int argc, char** argv) {
  const bool probe = argc == 2 && std::string(argv[1]) == "--probe";
  if (!probe && argc != 1 && argc != 4) {
    std::fprintf(stderr, "usage: cuda_train_gates [--probe | PYTHON TRAIN_REFERENCE_PY SCRATCH_DIR]\n");
    return 2;
  }
  auto device = kipp::cuda_device_info();
  if (!device) {
    std::printf("SKIPPED: %s\n", device.message().c_str());
    return 77;
  }
  if (probe) return 0;
  std::printf("GPU: %s (compute %d.%d)\n", device->name.c_str(), device->compute_major, device->compute_minor);
  gate_adamw();
  gate_norm_and_scale();
  gate_rmsnorm();
  gate_qk_norm_rope();
  gate_swiglu();
  gate_embedding();
  gate_attention();
  auto gemm = gpu::TrainGemm::create(nullptr);
  if (!gemm) {
    report(false, "cuBLASLt", gemm.message());
  } else {
    gate_gemm(**gemm);
    gate_head(**gemm);
  }
  gate_training_step(true);
  gate_training_step(false);
  gate_recompute();
  gate_device_optimizer();
  if (argc == 4) {
    const ReferenceTools tools{argv[1], argv[2], argv[3]};
    gate_torch_gradients(tools, true);
    gate_torch_gradients(tools, false);
  } else {
    std::printf("(the PyTorch autograd gates need PYTHON TRAIN_REFERENCE_PY SCRATCH_DIR)\n");
  }
  std::printf("%d of %d checks passed\n", kipp::gates::checks_run - kipp::gates::checks_failed,
              kipp::gates::checks_run);
  return kipp::gates::checks_failed == 0 ? 0 : 1;
}
