#include "train/fused_ops.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

// The element-wise passes are compiled for AVX-512 and AVX2 besides the baseline, picked at load
// time: the build targets baseline x86-64, and these loops are most of the non-GEMM time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KIPP_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KIPP_VECTOR_CLONES
#endif
#if defined(__clang__)
// clang leaves the float max reductions (`omp simd reduction(max : ...)`) scalar, as NaNs make
// their order matter, and warns that it did; the loops are right either way.
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

namespace kipp::train::ops {
namespace {

long as_long(size_t value) { return static_cast<long>(value); }
int as_int(size_t value) { return static_cast<int>(value); }

// e^x to about 1 ulp (Cephes' expf polynomial), in a form the loops vectorize, unlike libm's
// expf. Below -87.3 it returns 0 (no subnormals); NaN stays NaN.
inline float fast_exp(float x) {
  const float clamped = x > 88.3f ? 88.3f : (x < -87.3f ? -87.3f : x);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float shifted = clamped * 1.44269504f + kRound;
  const float n = shifted - kRound;
  const float r = (clamped - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((std::bit_cast<uint32_t>(shifted) - 0x4B400000u + 127u) << 23);
  return x < -87.3f ? 0.0f : p * scale;
}

// silu(gate) * up, the one formula of the forward and of the backward's recomputation.
inline float swiglu(float gate, float up, float denominator) { return gate / denominator * up; }

float sum_of_squares(const float* x, size_t n) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (size_t i = 0; i < n; ++i) sum += x[i] * x[i];
  return sum;
}

float inverse_rms(const float* x, size_t n, float eps) {
  return 1.0f / std::sqrt(sum_of_squares(x, n) / static_cast<float>(n) + eps);
}

void apply_row(const float* x, float rstd, const float* gain, size_t width, float* y) {
#pragma omp simd
  for (size_t i = 0; i < width; ++i) y[i] = x[i] * rstd * gain[i];
}

// Sums the per-chunk partials into `total` in chunk order.
void add_partials(const float* partials, size_t chunks, size_t width, float* total) {
  for (size_t c = 0; c < chunks; ++c) {
    const float* p = partials + c * width;
#pragma omp simd
    for (size_t i = 0; i < width; ++i) total[i] += p[i];
  }
}

}  // namespace

KIPP_VECTOR_CLONES
void rmsnorm_forward(const float* x, const float* gain, size_t rows, size_t width, float eps, float* rstd, float* y) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < as_long(rows); ++r) {
    const float* row = x + size_t(r) * width;
    rstd[r] = inverse_rms(row, width, eps);
    apply_row(row, rstd[r], gain, width, y + size_t(r) * width);
  }
}

KIPP_VECTOR_CLONES
void rmsnorm_apply(const float* x, const float* rstd, const float* gain, size_t rows, size_t width, float* y) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < as_long(rows); ++r)
    apply_row(x + size_t(r) * width, rstd[r], gain, width, y + size_t(r) * width);
}

KIPP_VECTOR_CLONES
void rmsnorm_backward(const float* dy, const float* x, const float* rstd, const float* gain, size_t rows, size_t width,
                      float* partials, float* dx, float* dgain) {
  const size_t chunks = (rows + kReductionRows - 1) / kReductionRows;
  const float inv_width = 1.0f / static_cast<float>(width);
#pragma omp parallel for schedule(static)
  for (long c = 0; c < as_long(chunks); ++c) {
    float* partial = partials + size_t(c) * width;
    std::fill(partial, partial + width, 0.0f);
    const size_t end = std::min(rows, (size_t(c) + 1) * kReductionRows);
    for (size_t r = size_t(c) * kReductionRows; r < end; ++r) {
      const float* dyr = dy + r * width;
      const float* xr = x + r * width;
      float* dxr = dx + r * width;
      const float s = rstd[r];
      // With n = x * s: dx = s * (dy*g - n * mean(dy*g*n)).
      float dot = 0;
#pragma omp simd reduction(+ : dot)
      for (size_t i = 0; i < width; ++i) dot += dyr[i] * gain[i] * (xr[i] * s);
      const float mean = dot * inv_width;
#pragma omp simd
      for (size_t i = 0; i < width; ++i) {
        const float n = xr[i] * s;
        dxr[i] += s * (dyr[i] * gain[i] - n * mean);
        partial[i] += dyr[i] * n;
      }
    }
  }
  add_partials(partials, chunks, width, dgain);
}

KIPP_VECTOR_CLONES
void qk_norm_rope_forward(const float* qkv, const float* q_gain, const float* k_gain, const HeadShape& shape,
                          RopeTables rope, float eps, float* rstd, float* qk) {
  const size_t hd = shape.head_dim, half = hd / 2, heads = shape.q_heads + shape.kv_heads;
  const size_t in_stride = shape.qkv_width(), out_stride = shape.qk_width();
#pragma omp parallel for schedule(static)
  for (long r = 0; r < as_long(shape.rows()); ++r) {
    const size_t position = size_t(r) % shape.seq_len;
    const float* cs = rope.cos + position * half;
    const float* sn = rope.sin + position * half;
    for (size_t j = 0; j < heads; ++j) {
      const float* x = qkv + size_t(r) * in_stride + j * hd;
      float* y = qk + size_t(r) * out_stride + j * hd;
      const float* g = j < shape.q_heads ? q_gain : k_gain;
      const float s = inverse_rms(x, hd, eps);
      rstd[size_t(r) * heads + j] = s;
#pragma omp simd
      for (size_t i = 0; i < half; ++i) {
        const float a = x[i] * s * g[i];
        const float b = x[i + half] * s * g[i + half];
        y[i] = a * cs[i] - b * sn[i];
        y[i + half] = b * cs[i] + a * sn[i];
      }
    }
  }
}

KIPP_VECTOR_CLONES
void qk_norm_rope_backward(const float* dqk, const float* qkv, const float* rstd, const float* q_gain,
                           const float* k_gain, const HeadShape& shape, RopeTables rope, float* partials, float* dqkv,
                           float* dq_gain, float* dk_gain) {
  const size_t hd = shape.head_dim, half = hd / 2, heads = shape.q_heads + shape.kv_heads;
  const size_t in_stride = shape.qkv_width(), d_stride = shape.qk_width();
  const size_t rows = shape.rows();
  const size_t chunks = (rows + kReductionRows - 1) / kReductionRows;
  const float inv_hd = 1.0f / static_cast<float>(hd);
  // partials: per chunk, the q gain's hd sums then the k gain's.
#pragma omp parallel for schedule(static)
  for (long c = 0; c < as_long(chunks); ++c) {
    float* partial = partials + size_t(c) * 2 * hd;
    std::fill(partial, partial + 2 * hd, 0.0f);
    const size_t end = std::min(rows, (size_t(c) + 1) * kReductionRows);
    for (size_t r = size_t(c) * kReductionRows; r < end; ++r) {
      const size_t position = r % shape.seq_len;
      const float* cs = rope.cos + position * half;
      const float* sn = rope.sin + position * half;
      for (size_t j = 0; j < heads; ++j) {
        const float* d = dqk + r * d_stride + j * hd;
        const float* x = qkv + r * in_stride + j * hd;
        float* dx = dqkv + r * in_stride + j * hd;
        const bool is_q = j < shape.q_heads;
        const float* g = is_q ? q_gain : k_gain;
        float* pg = partial + (is_q ? 0 : hd);
        const float s = rstd[r * heads + j];
        // The rotation's transpose takes d(rotated) to dy, the gradient of the gained norm output.
        float dot = 0;
#pragma omp simd reduction(+ : dot)
        for (size_t i = 0; i < half; ++i) {
          const float dya = d[i] * cs[i] + d[i + half] * sn[i];
          const float dyb = d[i + half] * cs[i] - d[i] * sn[i];
          const float na = x[i] * s, nb = x[i + half] * s;
          dot += dya * g[i] * na + dyb * g[i + half] * nb;
          pg[i] += dya * na;
          pg[i + half] += dyb * nb;
        }
        const float mean = dot * inv_hd;
#pragma omp simd
        for (size_t i = 0; i < half; ++i) {
          const float dya = d[i] * cs[i] + d[i + half] * sn[i];
          const float dyb = d[i + half] * cs[i] - d[i] * sn[i];
          dx[i] = s * (dya * g[i] - x[i] * s * mean);
          dx[i + half] = s * (dyb * g[i + half] - x[i + half] * s * mean);
        }
      }
    }
  }
  for (size_t c = 0; c < chunks; ++c) {
    const float* p = partials + c * 2 * hd;
    for (size_t i = 0; i < hd; ++i) {
      dq_gain[i] += p[i];
      dk_gain[i] += p[hd + i];
    }
  }
}

size_t attention_scratch(size_t max_seq_len) { return 2 * kAttentionBlock * max_seq_len; }

namespace {

// The pointers of one (sequence, query head) item.
struct HeadItem {
  const float* q;  // row 0 of the sequence, stride qk_width
  const float* k;  // stride qk_width
  const float* v;  // stride qkv_width
  size_t row0;     // first row of the sequence
  size_t head;
};

HeadItem head_item(const float* qk, const float* qkv, const HeadShape& shape, size_t item) {
  const size_t b = item / shape.q_heads, h = item % shape.q_heads;
  const size_t kv = h / (shape.q_heads / shape.kv_heads);
  const size_t row0 = b * shape.seq_len;
  return {qk + row0 * shape.qk_width() + h * shape.head_dim,
          qk + row0 * shape.qk_width() + (shape.q_heads + kv) * shape.head_dim,
          qkv + row0 * shape.qkv_width() + (shape.q_heads + shape.kv_heads + kv) * shape.head_dim, row0, h};
}

// scores[i - r0, j] = scale * q_i . k_j for the query rows [r0, r1) and keys [0, r1).
void block_scores(const HeadItem& it, const HeadShape& shape, size_t r0, size_t r1, float scale, float* scores) {
  const int ld = as_int(shape.qk_width());
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_int(r1 - r0), as_int(r1), as_int(shape.head_dim), scale,
              it.q + r0 * shape.qk_width(), ld, it.k, ld, 0.0f, scores, as_int(shape.seq_len));
}

}  // namespace

KIPP_VECTOR_CLONES
void attention_forward(const float* qk, const float* qkv, const HeadShape& shape, float* scratch, int threads,
                       float* stats, float* out) {
  const size_t T = shape.seq_len, hd = shape.head_dim, q_width = shape.q_width();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t items = shape.batch * shape.q_heads;
#pragma omp parallel num_threads(threads)
  {
    float* p = scratch + size_t(omp_get_thread_num()) * attention_scratch(T);
#pragma omp for schedule(static)
    for (long item = 0; item < as_long(items); ++item) {
      const HeadItem it = head_item(qk, qkv, shape, size_t(item));
      for (size_t r0 = 0; r0 < T; r0 += kAttentionBlock) {
        const size_t r1 = std::min(T, r0 + kAttentionBlock);
        block_scores(it, shape, r0, r1, scale, p);
        for (size_t i = r0; i < r1; ++i) {
          float* row = p + (i - r0) * T;
          float max = row[0];
#pragma omp simd reduction(max : max)
          for (size_t j = 1; j <= i; ++j) max = std::max(max, row[j]);
          float sum = 0;
#pragma omp simd reduction(+ : sum)
          for (size_t j = 0; j <= i; ++j) {
            row[j] = fast_exp(row[j] - max);
            sum += row[j];
          }
          const float inv = 1.0f / sum;
#pragma omp simd
          for (size_t j = 0; j <= i; ++j) row[j] *= inv;
          std::fill(row + i + 1, row + r1, 0.0f);
          float* st = stats + ((it.row0 + i) * shape.q_heads + it.head) * 2;
          st[0] = max;
          st[1] = inv;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_int(r1 - r0), as_int(hd), as_int(r1), 1.0f, p,
                    as_int(T), it.v, as_int(shape.qkv_width()), 0.0f, out + (it.row0 + r0) * q_width + it.head * hd,
                    as_int(q_width));
      }
    }
  }
}

KIPP_VECTOR_CLONES
void attention_backward(const float* qk, const float* qkv, const float* stats, const float* dout,
                        const HeadShape& shape, float* scratch, int threads, float* dqk, float* dk_heads,
                        float* dv_heads) {
  const size_t T = shape.seq_len, hd = shape.head_dim, q_width = shape.q_width();
  const int ld_qk = as_int(shape.qk_width()), ld_qkv = as_int(shape.qkv_width()), ld_q = as_int(q_width);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t items = shape.batch * shape.q_heads;
  const size_t blocks = (T + kAttentionBlock - 1) / kAttentionBlock;
#pragma omp parallel num_threads(threads)
  {
    float* p = scratch + size_t(omp_get_thread_num()) * attention_scratch(T);
    float* dp = p + kAttentionBlock * T;
#pragma omp for schedule(static)
    for (long item = 0; item < as_long(items); ++item) {
      const HeadItem it = head_item(qk, qkv, shape, size_t(item));
      const float* dout_item = dout + it.row0 * q_width + it.head * hd;
      float* dk = dk_heads + it.row0 * q_width + it.head * hd;
      float* dv = dv_heads + it.row0 * q_width + it.head * hd;
      // Last block first: it reaches every key, so it initializes dk and dv (beta 0) and the
      // earlier, shorter blocks accumulate.
      for (size_t block = blocks; block-- > 0;) {
        const size_t r0 = block * kAttentionBlock;
        const size_t r1 = std::min(T, r0 + kAttentionBlock), rows = r1 - r0;
        const float beta = r1 == T ? 0.0f : 1.0f;
        block_scores(it, shape, r0, r1, scale, p);
        for (size_t i = r0; i < r1; ++i) {
          float* row = p + (i - r0) * T;
          const float* st = stats + ((it.row0 + i) * shape.q_heads + it.head) * 2;
          const float max = st[0], inv = st[1];
#pragma omp simd
          for (size_t j = 0; j <= i; ++j) row[j] = fast_exp(row[j] - max) * inv;
          std::fill(row + i + 1, row + r1, 0.0f);
        }
        const float* dout_block = dout_item + r0 * q_width;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_int(r1), as_int(hd), as_int(rows), 1.0f, p, as_int(T),
                    dout_block, ld_q, beta, dv, ld_q);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_int(rows), as_int(r1), as_int(hd), 1.0f, dout_block,
                    ld_q, it.v, ld_qkv, 0.0f, dp, as_int(T));
        // d(scores) = p * (dp - sum_j p dp), times the scale the scores carried.
        for (size_t i = r0; i < r1; ++i) {
          const float* prow = p + (i - r0) * T;
          float* drow = dp + (i - r0) * T;
          float dot = 0;
#pragma omp simd reduction(+ : dot)
          for (size_t j = 0; j <= i; ++j) dot += prow[j] * drow[j];
#pragma omp simd
          for (size_t j = 0; j <= i; ++j) drow[j] = prow[j] * (drow[j] - dot) * scale;
          std::fill(drow + i + 1, drow + r1, 0.0f);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_int(rows), as_int(hd), as_int(r1), 1.0f, dp,
                    as_int(T), it.k, ld_qk, 0.0f, dqk + (it.row0 + r0) * shape.qk_width() + it.head * hd, ld_qk);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_int(r1), as_int(hd), as_int(rows), 1.0f, dp, as_int(T),
                    it.q + r0 * shape.qk_width(), ld_qk, beta, dk, ld_q);
      }
    }
  }
}

KIPP_VECTOR_CLONES
void reduce_kv_heads(const float* per_q_head, const HeadShape& shape, size_t out_stride, float* out) {
  const size_t hd = shape.head_dim, group = shape.q_heads / shape.kv_heads, q_width = shape.q_width();
#pragma omp parallel for schedule(static)
  for (long r = 0; r < as_long(shape.rows()); ++r) {
    const float* in = per_q_head + size_t(r) * q_width;
    float* o = out + size_t(r) * out_stride;
    for (size_t g = 0; g < shape.kv_heads; ++g) {
      const float* first = in + g * group * hd;
      std::memcpy(o + g * hd, first, hd * sizeof(float));
      for (size_t j = 1; j < group; ++j) {
        const float* src = first + j * hd;
#pragma omp simd
        for (size_t i = 0; i < hd; ++i) o[g * hd + i] += src[i];
      }
    }
  }
}

KIPP_VECTOR_CLONES
void swiglu_forward(const float* gate_up, size_t rows, size_t width, float* act) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < as_long(rows); ++r) {
    const float* gate = gate_up + size_t(r) * 2 * width;
    const float* up = gate + width;
    float* a = act + size_t(r) * width;
#pragma omp simd
    for (size_t i = 0; i < width; ++i) a[i] = swiglu(gate[i], up[i], 1.0f + fast_exp(-gate[i]));
  }
}

KIPP_VECTOR_CLONES
void swiglu_backward(float* gate_up, float* act_grad, size_t rows, size_t width) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < as_long(rows); ++r) {
    float* gate = gate_up + size_t(r) * 2 * width;
    float* up = gate + width;
    float* a = act_grad + size_t(r) * width;
#pragma omp simd
    for (size_t i = 0; i < width; ++i) {
      const float g = gate[i], u = up[i], da = a[i];
      const float denominator = 1.0f + fast_exp(-g);
      const float sigmoid = 1.0f / denominator;
      gate[i] = da * u * sigmoid * (1.0f + g * (1.0f - sigmoid));
      up[i] = da * g * sigmoid;
      a[i] = swiglu(g, u, denominator);
    }
  }
}

KIPP_VECTOR_CLONES
void cross_entropy(float* logits, const int32_t* targets, size_t rows, size_t vocab, bool backward, float grad_scale,
                   float* row_loss) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < as_long(rows); ++r) {
    float* z = logits + size_t(r) * vocab;
    const size_t target = size_t(targets[r]);
    const float z_target = z[target];
    float max = z[0];
#pragma omp simd reduction(max : max)
    for (size_t j = 1; j < vocab; ++j) max = std::max(max, z[j]);
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (size_t j = 0; j < vocab; ++j) {
      z[j] = fast_exp(z[j] - max);
      sum += z[j];
    }
    row_loss[r] = max + std::log(sum) - z_target;
    if (!backward) continue;
    const float factor = grad_scale / sum;
#pragma omp simd
    for (size_t j = 0; j < vocab; ++j) z[j] *= factor;
    z[target] -= grad_scale;
  }
}

void embedding_forward(const float* table, const int32_t* ids, size_t rows, size_t width, float* out) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < as_long(rows); ++r) {
    std::memcpy(out + size_t(r) * width, table + size_t(ids[r]) * width, width * sizeof(float));
  }
}

KIPP_VECTOR_CLONES
void embedding_backward(const float* dx, const int32_t* ids, size_t rows, size_t width, float* dtable) {
  // Split by columns, so repeated ids add up in row order whatever the thread count.
  constexpr size_t kColumns = 64;
  const size_t blocks = (width + kColumns - 1) / kColumns;
#pragma omp parallel for schedule(static)
  for (long b = 0; b < as_long(blocks); ++b) {
    const size_t c0 = size_t(b) * kColumns, c1 = std::min(width, c0 + kColumns);
    for (size_t r = 0; r < rows; ++r) {
      const float* src = dx + r * width;
      float* dst = dtable + size_t(ids[r]) * width;
#pragma omp simd
      for (size_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  }
}

}  // namespace kipp::train::ops
