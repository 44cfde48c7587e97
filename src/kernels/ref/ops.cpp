#include "kernels/ref/ops.h"

#include <cmath>
#include <cstring>

#include "core/half.h"
#include "format/quant.h"

namespace kipp::kernels::ref {
namespace {

constexpr size_t kLanes = 16;

float reduce_lanes(float* lanes) {
  for (size_t width = kLanes / 2; width > 0; width /= 2)
    for (size_t i = 0; i < width; ++i) lanes[i] += lanes[i + width];
  return lanes[0];
}

}  // namespace

float dot(const float* a, const float* b, size_t n) {
  float lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lanes[j] += a[i + j] * b[i + j];
  for (size_t j = 0; i + j < n; ++j) lanes[j] += a[i + j] * b[i + j];
  return reduce_lanes(lanes);
}

float dot_bf16(const float* a, const uint16_t* b, size_t n) {
  float lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lanes[j] += a[i + j] * bf16_to_f32(b[i + j]);
  for (size_t j = 0; i + j < n; ++j) lanes[j] += a[i + j] * bf16_to_f32(b[i + j]);
  return reduce_lanes(lanes);
}

void dequantize_row(const WeightMatrix& w, size_t row, float* out) {
  const uint8_t* src = w.data + row * w.row_bytes;
  switch (w.type) {
    case GgmlType::F32:
      std::memcpy(out, src, w.cols * sizeof(float));
      return;
    case GgmlType::BF16:
      bf16_to_f32_row(reinterpret_cast<const uint16_t*>(src), out, w.cols);
      return;
    case GgmlType::F16:
      f16_to_f32_row(reinterpret_cast<const uint16_t*>(src), out, w.cols);
      return;
    case GgmlType::Q8_0:
      dequantize_q8_0(reinterpret_cast<const BlockQ8_0*>(src), out, w.cols);
      return;
    case GgmlType::Q4_1:
      dequantize_affine4(reinterpret_cast<const BlockAffine4*>(src), out, w.cols);
      return;
    case GgmlType::Q4_0:
      break;
  }
  std::memset(out, 0, w.cols * sizeof(float));  // unreachable: make_weight_matrix rejects it
}

void matmul(const WeightMatrix& w, const float* x, size_t n_rows, size_t x_stride, float* out,
            size_t out_stride, float* row_scratch) {
  for (size_t o = 0; o < w.rows; ++o) {
    dequantize_row(w, o, row_scratch);
    for (size_t r = 0; r < n_rows; ++r) out[r * out_stride + o] = dot(row_scratch, x + r * x_stride, w.cols);
  }
}

void rms_norm(const float* x, const float* weight, float* out, size_t n, float eps) {
  double sum_squares = 0;
  for (size_t i = 0; i < n; ++i) sum_squares += double{x[i]} * x[i];
  const auto inverse_rms = static_cast<float>(1.0 / std::sqrt(sum_squares / static_cast<double>(n) + eps));
  for (size_t i = 0; i < n; ++i) out[i] = x[i] * inverse_rms * weight[i];
}

void rope_angles(size_t position, size_t head_dim, double theta, float* cos_out, float* sin_out) {
  for (size_t i = 0; i < head_dim / 2; ++i) {
    const double inverse_frequency = std::pow(theta, -static_cast<double>(2 * i) / static_cast<double>(head_dim));
    const double angle = static_cast<double>(position) * inverse_frequency;
    cos_out[i] = static_cast<float>(std::cos(angle));
    sin_out[i] = static_cast<float>(std::sin(angle));
  }
}

void rope(float* x, size_t heads, size_t head_dim, const float* cos, const float* sin) {
  const size_t half = head_dim / 2;
  for (size_t h = 0; h < heads; ++h) {
    float* v = x + h * head_dim;
    for (size_t i = 0; i < half; ++i) {
      const float first = v[i];
      const float second = v[i + half];
      v[i] = first * cos[i] - second * sin[i];
      v[i + half] = second * cos[i] + first * sin[i];
    }
  }
}

void softmax(float* x, size_t n) {
  float max_value = -INFINITY;
  for (size_t i = 0; i < n; ++i) max_value = std::fmax(max_value, x[i]);
  float sum = 0;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const float inverse_sum = 1.0f / sum;
  for (size_t i = 0; i < n; ++i) x[i] *= inverse_sum;
}

void attention(const float* q, size_t heads, const KvLayerView& kv, size_t length, float scale,
               float* scores, float* out) {
  const size_t group = heads / kv.kv_heads;
  const size_t kv_width = kv.kv_heads * kv.head_dim;
  for (size_t h = 0; h < heads; ++h) {
    const float* query = q + h * kv.head_dim;
    const size_t head_offset = (h / group) * kv.head_dim;
    for (size_t t = 0; t < length; ++t) {
      const uint16_t* block = kv.blocks[t / kKvBlockPositions];
      const uint16_t* key = block + kv.k_offset + (t % kKvBlockPositions) * kv_width + head_offset;
      scores[t] = dot_bf16(query, key, kv.head_dim) * scale;
    }
    softmax(scores, length);
    float* result = out + h * kv.head_dim;
    std::memset(result, 0, kv.head_dim * sizeof(float));
    for (size_t t = 0; t < length; ++t) {
      const uint16_t* block = kv.blocks[t / kKvBlockPositions];
      const uint16_t* value = block + kv.v_offset + (t % kKvBlockPositions) * kv_width + head_offset;
      for (size_t d = 0; d < kv.head_dim; ++d) result[d] += scores[t] * bf16_to_f32(value[d]);
    }
  }
}

void swiglu(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void add(float* acc, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += x[i];
}

void store_bf16(const float* in, uint16_t* out, size_t n) { f32_to_bf16_row(in, out, n); }

}  // namespace kipp::kernels::ref
