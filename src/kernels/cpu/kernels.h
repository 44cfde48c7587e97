// The one dispatch point through which the CPU backend calls every kernel: a table chosen once
// at start-up for this CPU. The reference table stays available as the oracle (KIPP_KERNELS=
// reference selects it for a whole process): its products multiply the FP32 activations
// themselves, while the fast tables round them first (matmul_input.h) and are tested against it
// bit for bit on the same rounded inputs and, on whole models, within a stated bound.
#pragma once

#include <span>
#include <string_view>

#include "kernels/ref/ops.h"

namespace kipp::kernels {

struct KernelTable {
  const char* name;
  // The format this table's products take their inputs in, by weight type: F32 for every type
  // in the reference, kernels::input_format's rounding in the fast tables.
  InputFormat (*input_format)(GgmlType weight_type);
  // Reads w as stored and, for BF16 matrices, as this table's pack_weights arranged them (a tied
  // output head, packed, serves the token embedding's lookups too).
  decltype(&ref::dequantize_row) dequantize_row;
  decltype(&ref::prepare_rows) prepare_rows;
  decltype(&ref::matmul) matmul;
  decltype(&ref::rms_norm) rms_norm;
  decltype(&ref::rope_angles) rope_angles;
  decltype(&ref::rope) rope;
  decltype(&ref::attention_rows) attention_rows;
  decltype(&ref::swiglu) swiglu;
  decltype(&ref::add) add;
  decltype(&ref::store_bf16) store_bf16;
  // Whether this table's matmul reads w fastest rearranged by pack_weights; null when the table
  // reads every matrix as stored.
  bool (*packs_weights)(const WeightMatrix& w) = nullptr;
  // Rearranges w's bytes (rows * row_bytes) into `out` that way, and returns true; false (out
  // untouched) when w is best read as stored.
  bool (*pack_weights)(const WeightMatrix& w, uint8_t* out) = nullptr;
  // Whether this table's BF16 products run on AMX tiles (the peak `kipp bench` holds them to).
  bool bf16_on_tiles = false;
  // Whether its quantized products of `rows` input rows run on AMX tiles on this CPU (the peak
  // `kipp bench` holds a prefill of that many tokens to); null: never.
  bool (*int8_on_tiles)(size_t rows) = nullptr;
};

// The table in use: KIPP_KERNELS names one of available_kernel_tables() (an unknown or
// unavailable name falls back to the best one); unset, the fastest this CPU runs.
const KernelTable& cpu_kernels();

// Every table this CPU can run, best last; the first is always the reference.
std::span<const KernelTable* const> available_kernel_tables();

const KernelTable* find_kernel_table(std::string_view name);

}  // namespace kipp::kernels
