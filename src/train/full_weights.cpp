#include "train/fused_ops.h"
#include "train/model_weights.h"

namespace kipp::train {
namespace {

// The full model: every tensor in the FP32 parameter buffer, with a gradient.
class FullWeights final : public ModelWeights {
 public:
  FullWeights(const ParameterLayout& layout, std::unique_ptr<LinearProducts> products)
      : layout_(layout), products_(std::move(products)) {
    const ModelConfig& c = layout_.config();
    hidden_ = c.hidden_size;
    ffn_ = c.ffn_size;
    vocab_ = c.vocab_size;
    q_width_ = c.q_width();
    qkv_width_ = q_width_ + 2 * size_t{c.kv_width()};
  }

  uint64_t parameter_count() const override { return layout_.total(); }
  void begin(const WeightPass& pass) override { pass_ = pass; }

  const float* gain(size_t layer, Gain which) const override { return pass_.params + gain_offset(layer, which); }
  const float* final_gain() const override { return pass_.params + layout_.final_norm(); }
  float* gain_grad(size_t layer, Gain which) override { return pass_.grads + gain_offset(layer, which); }
  float* final_gain_grad() override { return pass_.grads + layout_.final_norm(); }

  void embed(const int32_t* ids, size_t rows, float* out) override {
    ops::embedding_forward(pass_.params + layout_.embedding(), ids, rows, hidden_, out);
  }
  void embed_backward(const float* dx, const int32_t* ids, size_t rows) override {
    ops::embedding_backward(dx, ids, rows, hidden_, pass_.grads + layout_.embedding());
  }

  void forward(size_t layer, Block block, const float* x, size_t rows, bool accumulate, float* y) override {
    const Shape s = shape(layer, block);
    products_->xwt(x, pass_.params + s.offset, rows, s.out, s.in, accumulate ? 1.0f : 0.0f, y);
  }
  void backward_input(size_t layer, Block block, const float* dy, size_t rows, float* dx) override {
    const Shape s = shape(layer, block);
    products_->dy_w(dy, pass_.params + s.offset, rows, s.out, s.in, dx);
  }
  void backward_weights(size_t layer, Block block, const float* dy, const float* x, size_t rows) override {
    const Shape s = shape(layer, block);
    products_->dyt_x(dy, x, rows, s.out, s.in, pass_.grads + s.offset);
  }

  void head_forward(const float* x, size_t rows, float* logits) override {
    products_->xwt(x, pass_.params + layout_.head(), rows, vocab_, hidden_, 0.0f, logits);
  }
  void head_backward(const float* dlogits, const float* x, size_t rows, float* dx) override {
    products_->dy_w(dlogits, pass_.params + layout_.head(), rows, vocab_, hidden_, dx);
    products_->dyt_x(dlogits, x, rows, vocab_, hidden_, pass_.grads + layout_.head());
  }

  // Layer l's tensors lie between its input norm and the next layer's (or the final norm).
  BufferSlice layer_gradients(size_t layer) const override {
    const uint64_t begin = layout_.layers()[layer].attn_norm;
    const uint64_t end =
        layer + 1 < layout_.layers().size() ? layout_.layers()[layer + 1].attn_norm : layout_.final_norm();
    return {begin, end - begin};
  }

  uint64_t workspace_bytes() const override { return 0; }

 private:
  struct Shape {
    uint64_t offset;
    size_t out, in;
  };
  // q_proj, k_proj and v_proj are adjacent in the layout, and so are gate_proj and up_proj: one
  // matrix each.
  Shape shape(size_t layer, Block block) const {
    const LayerOffsets& w = layout_.layers()[layer];
    switch (block) {
      case Block::Qkv: return {w.q_proj, qkv_width_, hidden_};
      case Block::O: return {w.o_proj, hidden_, q_width_};
      case Block::GateUp: return {w.gate_proj, 2 * ffn_, hidden_};
      case Block::Down: break;
    }
    return {w.down_proj, hidden_, ffn_};
  }
  uint64_t gain_offset(size_t layer, Gain which) const {
    const LayerOffsets& w = layout_.layers()[layer];
    switch (which) {
      case Gain::Attn: return w.attn_norm;
      case Gain::Q: return w.q_norm;
      case Gain::K: return w.k_norm;
      case Gain::Ffn: break;
    }
    return w.ffn_norm;
  }

  ParameterLayout layout_;
  std::unique_ptr<LinearProducts> products_;
  size_t hidden_ = 0, ffn_ = 0, vocab_ = 0, q_width_ = 0, qkv_width_ = 0;
  WeightPass pass_;
};

}  // namespace

std::unique_ptr<ModelWeights> make_full_weights(const ParameterLayout& layout,
                                                std::unique_ptr<LinearProducts> products) {
  return std::make_unique<FullWeights>(layout, std::move(products));
}

}  // namespace kipp::train
