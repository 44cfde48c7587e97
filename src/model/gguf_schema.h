// How a Qwen3 model is laid out in GGUF: its metadata (keys in gguf_keys.h), tensor names,
// shapes and types.
// One table (expected_tensors) drives the converter, the loader and the weight binding, so
// a tensor is declared exactly once. Names follow llama.cpp's `qwen3` architecture; Kipp's
// own keys live under `kipp.`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"
#include "model/gguf_keys.h"
#include "model/model_config.h"
#include "model/registry.h"

namespace kipp {

inline constexpr uint32_t kKippFileFormatVersion = 1;

enum class QuantScheme { BF16, Q8_0, Affine4 };
std::string_view quant_scheme_name(QuantScheme scheme);  // "bf16", "q8_0", "affine4_gs32"
// Accepts the stored names and the CLI spelling "affine4".
std::optional<QuantScheme> parse_quant_scheme(std::string_view name);
GgmlType projection_type(QuantScheme scheme);
uint32_t gguf_file_type(QuantScheme scheme);  // llama.cpp's general.file_type: 32, 7, 3

enum class TensorRole {
  Embedding,
  AttnNorm,
  AttnQ,
  AttnK,
  AttnV,
  AttnOutput,
  AttnQNorm,
  AttnKNorm,
  FfnNorm,
  FfnGate,
  FfnUp,
  FfnDown,
  OutputNorm,
  Output,
};

struct TensorSpec {
  std::string gguf_name;
  std::string hf_name;
  TensorRole role;
  int layer;                   // -1 for model-level tensors
  std::vector<uint64_t> dims;  // ggml order: columns first
  GgmlType type;
};

// Every tensor a model with `config` stored with `scheme` has, in file order.
std::vector<TensorSpec> expected_tensors(const ModelConfig& config, QuantScheme scheme);

// Writes general.* and qwen3.* hyper-parameters (llama.cpp's keys and order).
void add_model_metadata(GgufWriter& writer, const ModelConfig& config, const std::string& name, QuantScheme scheme);
// Reads them back; every key must be present with the right type. Fills everything but
// bos/eos, which the tokenizer keys carry.
Expected<ModelConfig> read_model_metadata(const GgufFile& file);

enum class ProvenanceKind { Registry, Local };

struct Provenance {
  ProvenanceKind kind = ProvenanceKind::Local;
  std::string repository;    // registry only
  std::string revision;      // registry only
  std::string local_config;  // local only: the full config.json text
  Variant variant = Variant::Base;
  QuantScheme scheme = QuantScheme::BF16;
  std::vector<uint32_t> stop_token_ids;
  std::string content_hash;  // of the tensor directory and data, see content_hash.h
  bool dropped_tied_lm_head = false;
};

void add_provenance_metadata(GgufWriter& writer, const Provenance& provenance);
Expected<Provenance> read_provenance_metadata(const GgufFile& file);

// Reads a required metadata value of an exact GGUF type, naming the key when it is missing
// or has another type.
Expected<uint32_t> require_u32(const GgufFile& file, std::string_view key);
Expected<float> require_f32(const GgufFile& file, std::string_view key);
Expected<std::string> require_string(const GgufFile& file, std::string_view key);

}  // namespace kipp
