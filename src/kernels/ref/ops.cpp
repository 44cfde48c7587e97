#include "kernels/ref/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "format/quant.h"
#include "kernels/ref/q8_rows.h"

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
    case GgmlType::F32: std::memcpy(out, src, w.cols * sizeof(float)); return;
    case GgmlType::BF16: bf16_to_f32_row(reinterpret_cast<const uint16_t*>(src), out, w.cols); return;
    case GgmlType::F16: f16_to_f32_row(reinterpret_cast<const uint16_t*>(src), out, w.cols); return;
    case GgmlType::Q8_0: dequantize_q8_0(reinterpret_cast<const BlockQ8_0*>(src), out, w.cols); return;
    case GgmlType::Q4_1: dequantize_affine4(reinterpret_cast<const BlockAffine4*>(src), out, w.cols); return;
    case GgmlType::Q4_0: break;
  }
  std::memset(out, 0, w.cols * sizeof(float));  // unreachable: make_weight_matrix rejects it
}

void prepare_rows(const PreparedInput& in, size_t first, size_t count) {
  const size_t cols = in.cols, blocks = cols / kInputBlock;
  const float* x = in.f32 + first * in.f32_stride;
  switch (in.format) {
    case InputFormat::F32: break;
    case InputFormat::BF16:
      for (size_t r = 0; r < count; ++r) f32_to_bf16_row(x + r * in.f32_stride, in.bf16 + (first + r) * cols, cols);
      break;
    case InputFormat::Q8:
      quantize_q8_rows(x, count, in.f32_stride, cols, in.q8 + first * cols, in.q8_scale + first * blocks,
                       in.q8_sum + first * blocks, in.q8_scaled_sum + first * blocks);
      break;
  }
}

PreparedInput prepare_input(InputFormat format, const float* x, size_t rows, size_t x_stride, size_t cols,
                            void* storage) {
  const PreparedInput in = input_layout(format, x, rows, x_stride, cols, storage);
  prepare_rows(in, 0, rows);
  return in;
}

namespace {

float dot_prepared_bf16(const uint16_t* w, const uint16_t* x, size_t n) {
  float lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lanes[j] += bf16_to_f32(x[i + j]) * bf16_to_f32(w[i + j]);
  for (size_t j = 0; i + j < n; ++j) lanes[j] += bf16_to_f32(x[i + j]) * bf16_to_f32(w[i + j]);
  return reduce_lanes(lanes);
}

}  // namespace

void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  std::vector<float> row;
  if (in.format == InputFormat::F32 && w.type != GgmlType::F32) row.resize(w.cols);
  for (size_t o = 0; o < w.rows; ++o) {
    const uint8_t* weights = w.data + o * w.row_bytes;
    if (!row.empty()) dequantize_row(w, o, row.data());
    const float* weights_f32 = row.empty() ? reinterpret_cast<const float*>(weights) : row.data();
    for (size_t r = 0; r < in.rows; ++r) {
      float value = 0;
      switch (in.format) {
        case InputFormat::F32: value = dot(weights_f32, in.f32 + r * in.f32_stride, w.cols); break;
        case InputFormat::BF16:
          value = dot_prepared_bf16(reinterpret_cast<const uint16_t*>(weights), in.bf16 + r * in.cols, w.cols);
          break;
        case InputFormat::Q8:
          value = w.type == GgmlType::Q8_0 ? dot_q8_0_row(reinterpret_cast<const BlockQ8_0*>(weights), in, r)
                                           : dot_affine4_row(reinterpret_cast<const BlockAffine4*>(weights), in, r);
          break;
      }
      out[r * out_stride + o] = value;
    }
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

void attention(const float* q, size_t heads, const KvLayerView& kv, size_t length, float scale, float* scores,
               float* out) {
  const size_t group = heads / kv.kv_heads;
  const size_t kv_width = kv.position_stride;
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

void attention_rows(const float* q, size_t q_stride, size_t rows, size_t first_position, size_t group,
                    const KvLayerView& kv, float scale, float* scratch, float* out, size_t out_stride) {
  for (size_t r = 0; r < rows; ++r)
    attention(q + r * q_stride, group, kv, first_position + r + 1, scale, scratch, out + r * out_stride);
}

size_t attention_scratch_floats(size_t context_length, size_t rows, size_t group, size_t head_dim) {
  // the reference's scores, or one block of K and V widened plus, per query, the running max
  // and sum, a block of scores, a rescaling factor and the query rearranged
  return std::max(context_length, 2 * kKvBlockPositions * head_dim + (3 + kKvBlockPositions + head_dim) * rows * group);
}

void swiglu(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void add(float* acc, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += x[i];
}

void store_bf16(const float* in, uint16_t* out, size_t n) { f32_to_bf16_row(in, out, n); }

}  // namespace kipp::kernels::ref
