#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "core/random.h"
#include "train/model_weights.h"

namespace kipp::train {
namespace {

using kernels::WeightMatrix;

// Floats of the FP32 scratch W is dequantized into for dx = dy W, a block of rows at a time
// instead of a copy of W; blocks of whole panels, as long as the scratch allows, since sgemm
// runs faster the longer its inner dimension.
constexpr size_t kDequantFloats = size_t{2} << 20;
// Output rows of the base products are shared among threads in whole units of this many (the
// packed panels are cut only between panels).
constexpr size_t kUnitRows = 16;

struct Part {
  LoraTarget target;
  size_t column;  // where its outputs start in the block's output row
};

struct BlockParts {
  std::array<Part, 3> parts;
  size_t count = 0;
  size_t width = 0;  // the block's output row
};

// A frozen base multiplied through the kernel table, plus FP32 adapters y += s B A drop(x).
class LoraWeights final : public ModelWeights {
 public:
  LoraWeights(const FrozenBase& base, const AdapterLayout& adapters, std::unique_ptr<LinearProducts> products,
              size_t max_rows)
      : products_(std::move(products)),
        w_(base.weights()),
        k_(*w_.kernels),
        adapters_(adapters),
        scale_(float(adapters.options().scale())),
        dropout_(adapters.options().dropout),
        rank_(adapters.options().rank) {
    const ModelConfig& c = base.config();
    hidden_ = c.hidden_size;
    ffn_ = c.ffn_size;
    q_width_ = c.q_width();
    kv_width_ = c.kv_width();
    const size_t widest_in = std::max(hidden_, std::max(ffn_, q_width_));
    size_t prepared = 0;
    auto grow = [&](const WeightMatrix& m) {
      prepared = std::max(prepared, kernels::prepared_input_bytes(k_.input_format(m.type), max_rows, m.cols));
    };
    grow(w_.head);
    for (const FrozenLayer& layer : w_.layers)
      for (const WeightMatrix& m : layer.projections) grow(m);
    prepared_.assign(prepared / sizeof(float) + 1, 0.0f);
    sum_.assign(max_rows * hidden_, 0.0f);
    dequant_.assign(std::max(kDequantFloats, kUnitRows * widest_in), 0.0f);
    u_.assign(max_rows * rank_, 0.0f);
    g_.assign(max_rows * rank_, 0.0f);
    if (dropout_ > 0) {
      dropped_.assign(max_rows * widest_in, 0.0f);
      t_.assign(max_rows * widest_in, 0.0f);
    }
    sink_.assign(std::max<size_t>(hidden_, c.head_dim), 0.0f);
  }

  uint64_t parameter_count() const override { return adapters_.total(); }
  void begin(const WeightPass& pass) override { pass_ = pass; }

  const float* gain(size_t layer, Gain which) const override {
    const FrozenLayer& l = w_.layers[layer];
    switch (which) {
      case Gain::Attn: return l.attn_norm.data();
      case Gain::Q: return l.q_norm.data();
      case Gain::K: return l.k_norm.data();
      case Gain::Ffn: break;
    }
    return l.ffn_norm.data();
  }
  const float* final_gain() const override { return w_.final_norm.data(); }
  float* gain_grad(size_t, Gain) override { return sink_.data(); }
  float* final_gain_grad() override { return sink_.data(); }

  void embed(const int32_t* ids, size_t rows, float* out) override {
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; ++r) k_.dequantize_row(w_.embedding, size_t(ids[r]), out + r * hidden_);
  }
  void embed_backward(const float*, const int32_t*, size_t) override {}

  void forward(size_t layer, Block block, const float* x, size_t rows, bool accumulate, float* y) override {
    const BlockParts b = parts(block);
    // The base writes its products; a residual block's land in sum_ first.
    float* out = accumulate ? sum_.data() : y;
    for (size_t i = 0; i < b.count; ++i) {
      base_product(projection(layer, b.parts[i].target), x, rows, out + b.parts[i].column, b.width);
    }
    if (accumulate) {
      const size_t n = rows * b.width;
#pragma omp parallel for schedule(static)
      for (size_t i = 0; i < n; ++i) y[i] += out[i];
    }
    for (size_t i = 0; i < b.count; ++i) {
      const LoraAdapter* a = adapters_.find(layer, b.parts[i].target);
      if (!a) continue;
      const float* input = adapter_input(layer, b.parts[i].target, x, rows, a->in);
      // u = drop(x) A^T, then y += s u B^T into the projection's columns.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(rank_), int(a->in), 1.0f, input, int(a->in),
                  pass_.params + a->a, int(a->in), 0.0f, u_.data(), int(rank_));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(a->out), int(rank_), scale_, u_.data(),
                  int(rank_), pass_.params + a->b, int(rank_), 1.0f, y + b.parts[i].column, int(b.width));
    }
  }

  void backward_input(size_t layer, Block block, const float* dy, size_t rows, float* dx) override {
    const BlockParts b = parts(block);
    for (size_t i = 0; i < b.count; ++i) {
      base_backward(projection(layer, b.parts[i].target), dy + b.parts[i].column, b.width, rows, dx, i > 0);
    }
    for (size_t i = 0; i < b.count; ++i) {
      const LoraAdapter* a = adapters_.find(layer, b.parts[i].target);
      if (!a) continue;
      // g = dy B, then dx += s drop'(g A): the dropout mask (and its 1 / (1 - p)) applies again.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(rank_), int(a->out), 1.0f,
                  dy + b.parts[i].column, int(b.width), pass_.params + a->b, int(rank_), 0.0f, g_.data(), int(rank_));
      const bool masked = dropping();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(a->in), int(rank_), scale_, g_.data(),
                  int(rank_), pass_.params + a->a, int(a->in), masked ? 0.0f : 1.0f, masked ? t_.data() : dx,
                  int(a->in));
      if (masked) apply_mask(layer, b.parts[i].target, t_.data(), rows, a->in, dx, true);
    }
  }

  void backward_weights(size_t layer, Block block, const float* dy, const float* x, size_t rows) override {
    const BlockParts b = parts(block);
    for (size_t i = 0; i < b.count; ++i) {
      const LoraAdapter* a = adapters_.find(layer, b.parts[i].target);
      if (!a) continue;
      const float* input = adapter_input(layer, b.parts[i].target, x, rows, a->in);
      const float* dy_part = dy + b.parts[i].column;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(rank_), int(a->in), 1.0f, input, int(a->in),
                  pass_.params + a->a, int(a->in), 0.0f, u_.data(), int(rank_));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(rank_), int(a->out), 1.0f, dy_part,
                  int(b.width), pass_.params + a->b, int(rank_), 0.0f, g_.data(), int(rank_));
      // dA += s (dy B)^T drop(x); dB += s dy^T (drop(x) A^T).
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(rank_), int(a->in), int(rows), scale_, g_.data(),
                  int(rank_), input, int(a->in), 1.0f, pass_.grads + a->a, int(a->in));
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(a->out), int(rank_), int(rows), scale_, dy_part,
                  int(b.width), u_.data(), int(rank_), 1.0f, pass_.grads + a->b, int(rank_));
    }
  }

  void head_forward(const float* x, size_t rows, float* logits) override {
    base_product(w_.head, x, rows, logits, w_.head.rows);
  }
  void head_backward(const float* dlogits, const float* x, size_t rows, float* dx) override {
    (void)x;  // the head is frozen: no weight gradient
    base_backward(w_.head, dlogits, w_.head.rows, rows, dx, false);
  }

  // A layer's adapters are adjacent in the layout (A and B of each target).
  BufferSlice layer_gradients(size_t layer) const override {
    uint64_t begin = UINT64_MAX, end = 0;
    for (LoraTarget target : kAllLoraTargets) {
      const LoraAdapter* a = adapters_.find(layer, target);
      if (!a) continue;
      begin = std::min({begin, a->a, a->b});
      end = std::max({end, a->a + uint64_t(rank_) * a->in, a->b + uint64_t(a->out) * rank_});
    }
    return end ? BufferSlice{begin, end - begin} : BufferSlice{};
  }

  uint64_t workspace_bytes() const override {
    return (prepared_.size() + sum_.size() + dequant_.size() + u_.size() + g_.size() + dropped_.size() + t_.size() +
            sink_.size()) *
           sizeof(float);
  }

 private:
  BlockParts parts(Block block) const {
    switch (block) {
      case Block::Qkv:
        return {{{{LoraTarget::Q, 0}, {LoraTarget::K, q_width_}, {LoraTarget::V, q_width_ + kv_width_}}},
                3,
                q_width_ + 2 * kv_width_};
      case Block::O: return {{{{LoraTarget::O, 0}}}, 1, hidden_};
      case Block::GateUp: return {{{{LoraTarget::Gate, 0}, {LoraTarget::Up, ffn_}}}, 2, 2 * ffn_};
      case Block::Down: break;
    }
    return {{{{LoraTarget::Down, 0}}}, 1, hidden_};
  }
  const WeightMatrix& projection(size_t layer, LoraTarget target) const {
    return w_.layers[layer].projections[size_t(target)];
  }

  // out[r * out_stride + o] = x[r] . w[o] through the kernel table: the input prepared in the
  // table's format for w, each thread one contiguous range of whole units of output rows.
  void base_product(const WeightMatrix& w, const float* x, size_t rows, float* out, size_t out_stride) {
    const kernels::InputFormat format = k_.input_format(w.type);
    const kernels::PreparedInput in = kernels::input_layout(format, x, rows, w.cols, w.cols, prepared_.data());
    const size_t units = (w.rows + kUnitRows - 1) / kUnitRows;
#pragma omp parallel
    {
      const size_t threads = size_t(omp_get_num_threads()), thread = size_t(omp_get_thread_num());
      if (format != kernels::InputFormat::F32) {
        const size_t begin = rows * thread / threads, end = rows * (thread + 1) / threads;
        if (begin < end) k_.prepare_rows(in, begin, end - begin);
      }
#pragma omp barrier
      const size_t begin = units * thread / threads, end = units * (thread + 1) / threads;
      if (begin < end) {
        WeightMatrix part = w;
        const size_t row = begin * kUnitRows;
        part.data = w.data + row * w.row_bytes;
        part.rows = std::min(w.rows, end * kUnitRows) - row;
        k_.matmul(part, in, out + row, out_stride);
      }
    }
  }

  // dx (+)= dy W, W dequantized a block of rows at a time into FP32 scratch and multiplied in
  // the run's precision.
  void base_backward(const WeightMatrix& w, const float* dy, size_t dy_stride, size_t rows, float* dx,
                     bool accumulate) {
    const size_t block = dequant_.size() / w.cols / kUnitRows * kUnitRows;
    for (size_t first = 0; first < w.rows; first += block) {
      const size_t count = std::min(block, w.rows - first);
#pragma omp parallel for schedule(static)
      for (size_t r = 0; r < count; ++r) k_.dequantize_row(w, first + r, dequant_.data() + r * w.cols);
      products_->dy_w_strided(dy + first, dy_stride, dequant_.data(), rows, count, w.cols,
                              accumulate || first > 0 ? 1.0f : 0.0f, dx);
    }
  }

  bool dropping() const { return pass_.training && dropout_ > 0; }

  // Inverted dropout of an adapter's input: kept with probability 1 - p, scaled by 1 / (1 - p);
  // the mask a counter-based function of (noise key, layer, target, row, column).
  void apply_mask(size_t layer, LoraTarget target, const float* x, size_t rows, size_t width, float* out,
                  bool accumulate) const {
    const uint64_t key = counter_random(pass_.noise_key, layer * kAllLoraTargets.size() + size_t(target));
    const float keep_scale = float(1.0 / (1.0 - dropout_));
    const double p = dropout_;
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; ++r) {
      for (size_t c = 0; c < width; ++c) {
        const size_t i = r * width + c;
        const float value = uniform_open(counter_random(key, i)) > p ? x[i] * keep_scale : 0.0f;
        out[i] = accumulate ? out[i] + value : value;
      }
    }
  }

  const float* adapter_input(size_t layer, LoraTarget target, const float* x, size_t rows, size_t width) {
    if (!dropping()) return x;
    apply_mask(layer, target, x, rows, width, dropped_.data(), false);
    return dropped_.data();
  }

  std::unique_ptr<LinearProducts> products_;  // the base's dx, over blocks of W dequantized to FP32
  const FrozenWeights& w_;
  const kernels::KernelTable& k_;
  AdapterLayout adapters_;
  float scale_;
  double dropout_;
  size_t rank_;
  size_t hidden_ = 0, ffn_ = 0, q_width_ = 0, kv_width_ = 0;
  std::vector<float> prepared_, sum_, dequant_, u_, g_, dropped_, t_, sink_;
  WeightPass pass_;
};

}  // namespace

Expected<std::unique_ptr<ModelWeights>> make_lora_weights(const FrozenBase& base, const AdapterLayout& adapters,
                                                          std::unique_ptr<LinearProducts> products, size_t max_rows) {
  if (!adapters.options().enabled()) return make_error("LoRA model: the adapter rank must be positive");
  if (adapters.options().dropout < 0 || adapters.options().dropout >= 1) {
    return make_error("LoRA model: dropout " + std::to_string(adapters.options().dropout) + " is outside [0, 1)");
  }
  const ModelConfig& a = adapters.config();
  const ModelConfig& b = base.config();
  if (a.hidden_size != b.hidden_size || a.num_layers != b.num_layers || a.ffn_size != b.ffn_size ||
      a.num_heads != b.num_heads || a.num_kv_heads != b.num_kv_heads || a.head_dim != b.head_dim ||
      a.vocab_size != b.vocab_size) {
    return make_error("LoRA model: the adapters are laid out for another model than the base");
  }
  return std::unique_ptr<ModelWeights>(std::make_unique<LoraWeights>(base, adapters, std::move(products), max_rows));
}

}  // namespace kipp::train
