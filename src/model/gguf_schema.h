// How a Qwen3 model is laid out in GGUF: metadata keys, tensor names, shapes and types.
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
#include "model/model_config.h"
#include "model/registry.h"

namespace kipp {

namespace gguf_key {
inline constexpr std::string_view kArchitecture = "general.architecture";
inline constexpr std::string_view kType = "general.type";
inline constexpr std::string_view kName = "general.name";
inline constexpr std::string_view kFileType = "general.file_type";
inline constexpr std::string_view kQuantizationVersion = "general.quantization_version";
inline constexpr std::string_view kAlignment = "general.alignment";
inline constexpr std::string_view kBlockCount = "qwen3.block_count";
inline constexpr std::string_view kContextLength = "qwen3.context_length";
inline constexpr std::string_view kEmbeddingLength = "qwen3.embedding_length";
inline constexpr std::string_view kFeedForwardLength = "qwen3.feed_forward_length";
inline constexpr std::string_view kHeadCount = "qwen3.attention.head_count";
inline constexpr std::string_view kHeadCountKv = "qwen3.attention.head_count_kv";
inline constexpr std::string_view kRopeFreqBase = "qwen3.rope.freq_base";
inline constexpr std::string_view kRmsEpsilon = "qwen3.attention.layer_norm_rms_epsilon";
inline constexpr std::string_view kKeyLength = "qwen3.attention.key_length";
inline constexpr std::string_view kValueLength = "qwen3.attention.value_length";
inline constexpr std::string_view kVocabSize = "qwen3.vocab_size";
inline constexpr std::string_view kTokenizerModel = "tokenizer.ggml.model";
inline constexpr std::string_view kTokenizerPre = "tokenizer.ggml.pre";
inline constexpr std::string_view kTokens = "tokenizer.ggml.tokens";
inline constexpr std::string_view kTokenTypes = "tokenizer.ggml.token_type";
inline constexpr std::string_view kMerges = "tokenizer.ggml.merges";
inline constexpr std::string_view kEosTokenId = "tokenizer.ggml.eos_token_id";
inline constexpr std::string_view kPaddingTokenId = "tokenizer.ggml.padding_token_id";
inline constexpr std::string_view kBosTokenId = "tokenizer.ggml.bos_token_id";
inline constexpr std::string_view kAddBosToken = "tokenizer.ggml.add_bos_token";
inline constexpr std::string_view kChatTemplate = "tokenizer.chat_template";
inline constexpr std::string_view kKippFormatVersion = "kipp.format_version";
inline constexpr std::string_view kKippProvenance = "kipp.provenance";
inline constexpr std::string_view kKippRepository = "kipp.source.repository";
inline constexpr std::string_view kKippRevision = "kipp.source.revision";
inline constexpr std::string_view kKippVariant = "kipp.variant";
inline constexpr std::string_view kKippLocalConfig = "kipp.local.config";
inline constexpr std::string_view kKippContentHash = "kipp.content_hash";
inline constexpr std::string_view kKippQuantScheme = "kipp.quant.scheme";
inline constexpr std::string_view kKippStopTokenIds = "kipp.stop_token_ids";
inline constexpr std::string_view kKippTiedLmHead = "kipp.source.tied_lm_head";
// Optional: the chat format a model trained here was trained on ("chatml", "llama3", ...; see
// chat/chat_template.h). Absent: Qwen3 instruct checkpoints use their own chat_template.
inline constexpr std::string_view kKippChatFormat = "kipp.chat_format";
}  // namespace gguf_key

inline constexpr uint32_t kKippFileFormatVersion = 1;

enum class QuantScheme { BF16, Q8_0, Affine4 };
std::string_view quant_scheme_name(QuantScheme scheme);  // "bf16", "q8_0", "affine4_gs32"
// Accepts the stored names and the CLI spelling "affine4".
std::optional<QuantScheme> parse_quant_scheme(std::string_view name);
GgmlType projection_type(QuantScheme scheme);
uint32_t gguf_file_type(QuantScheme scheme);  // llama.cpp's general.file_type: 32, 7, 3

enum class TensorRole {
  Embedding, AttnNorm, AttnQ, AttnK, AttnV, AttnOutput, AttnQNorm, AttnKNorm,
  FfnNorm, FfnGate, FfnUp, FfnDown, OutputNorm, Output,
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
void add_model_metadata(GgufWriter& writer, const ModelConfig& config, const std::string& name,
                        QuantScheme scheme);
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
