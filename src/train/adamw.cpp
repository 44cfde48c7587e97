#include "train/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kipp::train {

AdamW::AdamW(std::span<const ParamTensor> tensors, const AdamWOptions& options) : options_(options) {
  uint64_t total = 0;
  for (const ParamTensor& t : tensors) {
    total = std::max(total, t.offset + t.count);
    const bool decays = t.kind == ParamKind::Projection || t.kind == ParamKind::Head ||
                        (t.kind == ParamKind::Embedding && options.decay_embeddings);
    ranges_.push_back({t.offset, t.count, decays});
  }
  m_.assign(total, 0.0f);
  v_.assign(total, 0.0f);
}

void AdamW::step(std::span<float> params, std::span<const float> grads, double lr) {
  ++steps_;
  const float beta1 = float(options_.beta1), beta2 = float(options_.beta2);
  const float bias1 = float(1.0 - std::pow(options_.beta1, double(steps_)));
  const float bias2_sqrt = float(std::sqrt(1.0 - std::pow(options_.beta2, double(steps_))));
  const float step_size = float(lr) / bias1;
  const float eps = float(options_.eps);
  const float decay = float(lr * options_.weight_decay);
  float* p = params.data();
  const float* g = grads.data();
  float* m = m_.data();
  float* v = v_.data();
  // PyTorch's order: decay first (p *= 1 - lr*wd), then the Adam update with
  // denominator sqrt(v) / sqrt(1 - beta2^t) + eps. One parallel region; tensors are
  // independent, so threads move on without waiting at each one.
#pragma omp parallel
  for (const DecayRange& range : ranges_) {
    const float keep = range.decays ? 1.0f - decay : 1.0f;
    const long begin = long(range.offset), end = long(range.offset + range.count);
#pragma omp for schedule(static) nowait
    for (long i = begin; i < end; ++i) {
      p[i] *= keep;
      m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
      v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
      p[i] -= step_size * m[i] / (std::sqrt(v[i]) / bias2_sqrt + eps);
    }
  }
}

double gradient_norm(std::span<const float> grads) {
  const float* g = grads.data();
  const long n = long(grads.size());
  // Fixed-size chunks summed in order: the result does not depend on the thread count.
  constexpr long kChunk = 1 << 16;
  const long chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(size_t(chunks), 0.0);
#pragma omp parallel for schedule(static)
  for (long c = 0; c < chunks; ++c) {
    double sum = 0;
    const long end = std::min(n, (c + 1) * kChunk);
    for (long i = c * kChunk; i < end; ++i) sum += double(g[i]) * double(g[i]);
    partial[size_t(c)] = sum;
  }
  double total = 0;
  for (double s : partial) total += s;
  return std::sqrt(total);
}

void scale_gradients(std::span<float> grads, float factor) {
  float* g = grads.data();
  const long n = long(grads.size());
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) g[i] *= factor;
}

double clip_factor(double norm, double max_norm) {
  if (max_norm <= 0 || !std::isfinite(norm)) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

double clip_gradient_norm(std::span<float> grads, double max_norm) {
  const double norm = gradient_norm(grads);
  const double factor = clip_factor(norm, max_norm);
  if (factor < 1.0) scale_gradients(grads, float(factor));
  return norm;
}

}  // namespace kipp::train
