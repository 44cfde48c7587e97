#include "kernels/cpu/portable_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "format/quant.h"
#include "kernels/ref/q8_rows.h"

// Highway needs this order: the target list, then highway.h, then its -inl headers.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/portable_ops.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kipp::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using FloatTag = hn::ScalableTag<float>;

// Element-wise loops the compiler vectorizes for the target this copy is built for; they
// compute exactly what the reference computes.
void PrepareBf16(const float* x, size_t rows, size_t x_stride, size_t cols, uint16_t* out) {
  for (size_t r = 0; r < rows; ++r) {
    const float* in = x + r * x_stride;
    uint16_t* row = out + r * cols;
    for (size_t i = 0; i < cols; ++i) row[i] = f32_to_bf16(in[i]);
  }
}

// ref::quantize_q8_rows in vectors (the compiler leaves its fmax/fmin calls scalar): the
// maximum is exact in any order, each code is the same product rounded to nearest even, and
// NaN inputs get the reference's answers (ignored by the maximum, code -127).
void PrepareQ8(const float* x, size_t rows, size_t x_stride, size_t cols, int8_t* codes, float* scales, int32_t* sums,
               float* scaled_sums) {
  const FloatTag d;
  const hn::RebindToSigned<FloatTag> di;
  const hn::Rebind<int8_t, FloatTag> d8;
  const size_t lanes = hn::Lanes(d);
  const size_t blocks = cols / kInputBlock;
  const auto lowest = hn::Set(d, -127.0f), highest = hn::Set(d, 127.0f);
  for (size_t r = 0; r < rows; ++r)
    for (size_t b = 0; b < blocks; ++b) {
      const float* values = x + r * x_stride + b * kInputBlock;
      int8_t* q = codes + r * cols + b * kInputBlock;
      auto largest_lanes = hn::Zero(d);
      for (size_t i = 0; i < kInputBlock; i += lanes) {
        const auto magnitude = hn::Abs(hn::LoadU(d, values + i));
        largest_lanes = hn::Max(largest_lanes, hn::IfThenZeroElse(hn::IsNaN(magnitude), magnitude));
      }
      const float largest = hn::GetLane(hn::MaxOfLanes(d, largest_lanes));
      const float quotient = largest > 0 ? 127.0f / largest : 0.0f;
      const auto inverse = hn::Set(d, std::isfinite(quotient) ? quotient : 0.0f);
      auto sum_lanes = hn::Zero(di);
      for (size_t i = 0; i < kInputBlock; i += lanes) {
        const auto scaled = hn::Round(hn::Mul(hn::LoadU(d, values + i), inverse));
        const auto code =
            hn::ConvertTo(di, hn::IfThenElse(hn::IsNaN(scaled), lowest, hn::Min(highest, hn::Max(lowest, scaled))));
        sum_lanes = hn::Add(sum_lanes, code);
        hn::StoreU(hn::DemoteTo(d8, code), d8, q + i);
      }
      const size_t block = r * blocks + b;
      scales[block] = largest / 127.0f;
      sums[block] = hn::GetLane(hn::SumOfLanes(di, sum_lanes));
      scaled_sums[block] = scales[block] * static_cast<float>(sums[block]);
    }
}

float DotF32(const float* a, const float* b, size_t n) {
  const FloatTag d;
  const size_t lanes = hn::Lanes(d);
  auto sum0 = hn::Zero(d), sum1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    sum0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), sum0);
    sum1 = hn::MulAdd(hn::LoadU(d, a + i + lanes), hn::LoadU(d, b + i + lanes), sum1);
  }
  for (; i + lanes <= n; i += lanes) sum0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), sum0);
  float total = hn::GetLane(hn::SumOfLanes(d, hn::Add(sum0, sum1)));
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

float DotBf16(const uint16_t* a, const uint16_t* b, size_t n) {
  const FloatTag d;
  const hn::Rebind<hwy::bfloat16_t, FloatTag> dbf;
  const size_t lanes = hn::Lanes(d);
  auto sum = hn::Zero(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto x = hn::PromoteTo(d, hn::LoadU(dbf, reinterpret_cast<const hwy::bfloat16_t*>(a + i)));
    const auto w = hn::PromoteTo(d, hn::LoadU(dbf, reinterpret_cast<const hwy::bfloat16_t*>(b + i)));
    sum = hn::MulAdd(x, w, sum);
  }
  float total = hn::GetLane(hn::SumOfLanes(d, sum));
  for (; i < n; ++i) total += bf16_to_f32(a[i]) * bf16_to_f32(b[i]);
  return total;
}

void Matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  if (w.type != GgmlType::BF16 && w.type != GgmlType::Q8_0 && w.type != GgmlType::Q4_1 && w.type != GgmlType::F32) {
    ref::matmul(w, in, out, out_stride);
    return;
  }
  for (size_t o = 0; o < w.rows; ++o) {
    const uint8_t* weights = w.data + o * w.row_bytes;
    for (size_t r = 0; r < in.rows; ++r) {
      float value = 0;
      if (w.type == GgmlType::BF16) {
        value = DotBf16(in.bf16 + r * in.cols, reinterpret_cast<const uint16_t*>(weights), w.cols);
      } else if (w.type == GgmlType::Q8_0) {
        value = ref::dot_q8_0_row(reinterpret_cast<const BlockQ8_0*>(weights), in, r);
      } else if (w.type == GgmlType::Q4_1) {
        value = ref::dot_affine4_row(reinterpret_cast<const BlockAffine4*>(weights), in, r);
      } else {
        value = DotF32(reinterpret_cast<const float*>(weights), in.f32 + r * in.f32_stride, w.cols);
      }
      out[r * out_stride + o] = value;
    }
  }
}

void RmsNorm(const float* x, const float* weight, float* out, size_t n, float eps) {
  const float inverse_rms = 1.0f / std::sqrt(DotF32(x, x, n) / static_cast<float>(n) + eps);
  const FloatTag d;
  const size_t lanes = hn::Lanes(d);
  const auto scale = hn::Set(d, inverse_rms);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, x + i), scale), hn::LoadU(d, weight + i)), d, out + i);
  for (; i < n; ++i) out[i] = x[i] * inverse_rms * weight[i];
}

// Products and differences rounded one at a time (no fused multiply-add), as the reference.
void Rope(float* x, size_t heads, size_t head_dim, const float* cos, const float* sin) {
  const FloatTag d;
  const size_t lanes = hn::Lanes(d), half = head_dim / 2;
  for (size_t h = 0; h < heads; ++h) {
    float* first = x + h * head_dim;
    float* second = first + half;
    size_t i = 0;
    for (; i + lanes <= half; i += lanes) {
      const auto a = hn::LoadU(d, first + i), b = hn::LoadU(d, second + i);
      const auto c = hn::LoadU(d, cos + i), s = hn::LoadU(d, sin + i);
      hn::StoreU(hn::Sub(hn::Mul(a, c), hn::Mul(b, s)), d, first + i);
      hn::StoreU(hn::Add(hn::Mul(b, c), hn::Mul(a, s)), d, second + i);
    }
    for (; i < half; ++i) {
      const float a = first[i], b = second[i];
      first[i] = a * cos[i] - b * sin[i];
      second[i] = b * cos[i] + a * sin[i];
    }
  }
}

// acc = acc * keep + weight * value for head_dim floats of a BF16 value vector.
void ScaleAddBf16(float* acc, float keep, float weight, const uint16_t* value, size_t n) {
  const FloatTag d;
  const hn::Rebind<hwy::bfloat16_t, FloatTag> dbf;
  const size_t lanes = hn::Lanes(d);
  const auto keep_v = hn::Set(d, keep), weight_v = hn::Set(d, weight);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::PromoteTo(d, hn::LoadU(dbf, reinterpret_cast<const hwy::bfloat16_t*>(value + i)));
    hn::StoreU(hn::MulAdd(weight_v, v, hn::Mul(hn::LoadU(d, acc + i), keep_v)), d, acc + i);
  }
  for (; i < n; ++i) acc[i] = acc[i] * keep + weight * bf16_to_f32(value[i]);
}

float DotF32Bf16(const float* a, const uint16_t* b, size_t n) {
  const FloatTag d;
  const hn::Rebind<hwy::bfloat16_t, FloatTag> dbf;
  const size_t lanes = hn::Lanes(d);
  auto sum0 = hn::Zero(d), sum1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    sum0 = hn::MulAdd(hn::LoadU(d, a + i),
                      hn::PromoteTo(d, hn::LoadU(dbf, reinterpret_cast<const hwy::bfloat16_t*>(b + i))), sum0);
    sum1 = hn::MulAdd(hn::LoadU(d, a + i + lanes),
                      hn::PromoteTo(d, hn::LoadU(dbf, reinterpret_cast<const hwy::bfloat16_t*>(b + i + lanes))), sum1);
  }
  for (; i + lanes <= n; i += lanes)
    sum0 = hn::MulAdd(hn::LoadU(d, a + i),
                      hn::PromoteTo(d, hn::LoadU(dbf, reinterpret_cast<const hwy::bfloat16_t*>(b + i))), sum0);
  float total = hn::GetLane(hn::SumOfLanes(d, hn::Add(sum0, sum1)));
  for (; i < n; ++i) total += a[i] * bf16_to_f32(b[i]);
  return total;
}

// x[i] = exp(x[i] - shift) for a block of scores, whole vectors at once rather than one scalar
// exp per position (bench/attention_bench shows the difference).
void ExpShifted(float* x, size_t n, float shift) {
  const FloatTag d;
  const size_t lanes = hn::Lanes(d);
  const auto shift_v = hn::Set(d, shift);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), shift_v)), d, x + i);
  for (; i < n; ++i) x[i] = std::exp(x[i] - shift);
}

void Attention(const float* q, size_t heads, const KvLayerView& kv, size_t length, float scale, float* scores,
               float* out) {
  const size_t group = heads / kv.kv_heads, hd = kv.head_dim;
  const size_t kv_width = kv.position_stride;
  for (size_t h = 0; h < heads; ++h) {
    const float* query = q + h * hd;
    const size_t head_offset = (h / group) * hd;
    float* result = out + h * hd;
    std::fill(result, result + hd, 0.0f);
    float running_max = -INFINITY, total = 0;
    for (size_t start = 0; start < length; start += kKvBlockPositions) {
      const uint16_t* block = kv.blocks[start / kKvBlockPositions];
      const size_t count = std::min(kKvBlockPositions, length - start);
      float block_max = -INFINITY;
      for (size_t t = 0; t < count; ++t) {
        scores[t] = DotF32Bf16(query, block + kv.k_offset + t * kv_width + head_offset, hd) * scale;
        block_max = std::max(block_max, scores[t]);
      }
      // Rescale what was summed so far to the new maximum, then add this block.
      const float new_max = std::max(running_max, block_max);
      const float keep = std::exp(running_max - new_max);
      total *= keep;
      ExpShifted(scores, count, new_max);
      for (size_t t = 0; t < count; ++t) {
        total += scores[t];
        ScaleAddBf16(result, t == 0 ? keep : 1.0f, scores[t], block + kv.v_offset + t * kv_width + head_offset, hd);
      }
      running_max = new_max;
    }
    const FloatTag d;
    const size_t lanes = hn::Lanes(d);
    const auto inverse = hn::Set(d, 1.0f / total);
    size_t i = 0;
    for (; i + lanes <= hd; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, result + i), inverse), d, result + i);
    for (; i < hd; ++i) result[i] *= 1.0f / total;
  }
}

void Swiglu(const float* gate, const float* up, float* out, size_t n) {
  const FloatTag d;
  const size_t lanes = hn::Lanes(d);
  const auto one = hn::Set(d, 1.0f);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto g = hn::LoadU(d, gate + i);
    const auto sigmoid = hn::Div(one, hn::Add(one, hn::Exp(d, hn::Neg(g))));
    hn::StoreU(hn::Mul(hn::Mul(g, sigmoid), hn::LoadU(d, up + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void Add(float* acc, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += x[i];
}

void StoreBf16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(in[i]);
}

}  // namespace kipp::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kipp::kernels::portable {

HWY_EXPORT(PrepareBf16);
HWY_EXPORT(PrepareQ8);
HWY_EXPORT(Matmul);
HWY_EXPORT(RmsNorm);
HWY_EXPORT(Rope);
HWY_EXPORT(Attention);
HWY_EXPORT(Swiglu);
HWY_EXPORT(Add);
HWY_EXPORT(StoreBf16);

void cap_at_avx2() { hwy::DisableTargets(HWY_AVX3 | HWY_AVX3_DL); }

void prepare_rows(const PreparedInput& in, size_t first, size_t count) {
  const size_t cols = in.cols, blocks = cols / kInputBlock;
  const float* x = in.f32 + first * in.f32_stride;
  if (in.format == InputFormat::BF16) {
    HWY_DYNAMIC_DISPATCH(PrepareBf16)(x, count, in.f32_stride, cols, in.bf16 + first * cols);
  } else if (in.format == InputFormat::Q8) {
    HWY_DYNAMIC_DISPATCH(PrepareQ8)
    (x, count, in.f32_stride, cols, in.q8 + first * cols, in.q8_scale + first * blocks, in.q8_sum + first * blocks,
     in.q8_scaled_sum + first * blocks);
  }
}

void matmul(const WeightMatrix& w, const PreparedInput& in, float* out, size_t out_stride) {
  HWY_DYNAMIC_DISPATCH(Matmul)(w, in, out, out_stride);
}
void rms_norm(const float* x, const float* weight, float* out, size_t n, float eps) {
  HWY_DYNAMIC_DISPATCH(RmsNorm)(x, weight, out, n, eps);
}
void rope(float* x, size_t heads, size_t head_dim, const float* cos, const float* sin) {
  HWY_DYNAMIC_DISPATCH(Rope)(x, heads, head_dim, cos, sin);
}
void attention(const float* q, size_t heads, const KvLayerView& kv, size_t length, float scale, float* scores,
               float* out) {
  HWY_DYNAMIC_DISPATCH(Attention)(q, heads, kv, length, scale, scores, out);
}
void attention_rows(const float* q, size_t q_stride, size_t rows, size_t first_position, size_t group,
                    const KvLayerView& kv, float scale, float* scratch, float* out, size_t out_stride) {
  for (size_t r = 0; r < rows; ++r)
    attention(q + r * q_stride, group, kv, first_position + r + 1, scale, scratch, out + r * out_stride);
}
void swiglu(const float* gate, const float* up, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(Swiglu)(gate, up, out, n);
}
void add(float* acc, const float* x, size_t n) { HWY_DYNAMIC_DISPATCH(Add)(acc, x, n); }
void store_bf16(const float* in, uint16_t* out, size_t n) { HWY_DYNAMIC_DISPATCH(StoreBf16)(in, out, n); }

}  // namespace kipp::kernels::portable
#endif  // HWY_ONCE
