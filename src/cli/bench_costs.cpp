#include "cli/bench_costs.h"

namespace kipp::cli {
namespace {

uint64_t matrix_multiply_adds(const TensorView& w) { return w.rows * w.cols; }

}  // namespace

uint64_t decode_weight_bytes(const Model& model) {
  const Qwen3Weights& w = model.weights();
  uint64_t bytes = w.token_embedding.bytes / w.token_embedding.rows;
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* t : {&l.attn_norm, &l.attn_q, &l.attn_k, &l.attn_v, &l.attn_output, &l.attn_q_norm,
                                &l.attn_k_norm, &l.ffn_norm, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
      bytes += t->bytes;
  }
  return bytes + w.output_norm.bytes + w.output.bytes;
}

double decode_kv_bytes(const ModelConfig& config, double positions) {
  return static_cast<double>(config.kv_bytes_per_token()) * positions;
}

double prefill_flops(const Model& model, uint32_t tokens) {
  const Qwen3Weights& w = model.weights();
  const ModelConfig& c = model.config();
  uint64_t per_token = 0;
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* t : {&l.attn_q, &l.attn_k, &l.attn_v, &l.attn_output, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
      per_token += matrix_multiply_adds(*t);
  }
  const double n = tokens;
  const double visible_pairs = n * (n + 1) / 2;
  const double attention = 2.0 * visible_pairs * static_cast<double>(c.q_width()) * c.num_layers;  // Q.K and P.V
  const double head = static_cast<double>(matrix_multiply_adds(w.output));
  return 2.0 * (static_cast<double>(per_token) * n + attention + head);
}

kernels::MultiplyAddKind projection_multiply_add_kind(GgmlType projection_type, bool bf16_on_tiles,
                                                      bool int8_on_tiles) {
  switch (projection_type) {
    case GgmlType::BF16: return bf16_on_tiles ? kernels::MultiplyAddKind::AmxBf16 : kernels::MultiplyAddKind::Bf16Dot;
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1: return int8_on_tiles ? kernels::MultiplyAddKind::AmxInt8 : kernels::MultiplyAddKind::Int8Dot;
    case GgmlType::F32:
    case GgmlType::F16: return kernels::MultiplyAddKind::Fp32Fma;
  }
  return kernels::MultiplyAddKind::Fp32Fma;
}

}  // namespace kipp::cli
