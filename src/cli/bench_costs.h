// What one token costs the engine, from the model's tensors: the bytes a decode step reads
// (weights plus K/V) and the multiply-add work of a prefill. `kipp bench` divides its measured
// rates by these to say how close the engine runs to the machine's memory bandwidth and peak.
#pragma once

#include <cstdint>

#include "kernels/cpu/machine_probe.h"
#include "model/model.h"

namespace kipp::cli {

// Weight bytes one decode step reads: every tensor of every layer (the seven projections and
// the four norms), the output norm and the output head in full, and one embedding row.
uint64_t decode_weight_bytes(const Model& model);

// K/V bytes attention reads for one token that sees `positions` positions (itself included):
// K and V of every layer, BF16.
double decode_kv_bytes(const ModelConfig& config, double positions);

// FLOPs (2 per multiply-add) of a prefill of `tokens` tokens with logits for the last one:
// every layer's seven projections for every token, causal attention (Q.K and P.V over the
// L(L+1)/2 visible pairs, per head and layer) and the output head for one row.
double prefill_flops(const Model& model, uint32_t tokens);

// The multiply-add instruction a kernel would use for the projections' element type in a
// prefill: BF16 -> the BF16 dot product (AMX tiles when `bf16_on_tiles`), Q8_0 and affine4
// (Q4_1) -> the int8 dot product (AMX tiles when `int8_on_tiles`), F32/F16 -> FP32 FMA.
kernels::MultiplyAddKind projection_multiply_add_kind(GgmlType projection_type, bool bf16_on_tiles, bool int8_on_tiles);

}  // namespace kipp::cli
