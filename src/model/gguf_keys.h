// The GGUF metadata keys of a Qwen3 model: llama.cpp's `qwen3` architecture, Kipp's own keys
// under `kipp.`. Apart from the schema (gguf_schema.h) so that the model configuration's field
// table (model_config.h) can name the keys it is stored under.
#pragma once

#include <string_view>

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

}  // namespace kipp
