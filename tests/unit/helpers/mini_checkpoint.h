// Test helper: a miniature Hugging-Face-layout Qwen3 checkpoint written by Kipp's own
// safetensors writer, small and fast enough to build inside a test (~60 kB with the defaults).
// It converts with `kipp convert` (local provenance) and opens with kipp::Model::open:
// config.json, generation_config.json, a byte-level BPE tokenizer.json with the exact Qwen2
// pre-tokenizer (256 byte tokens, a few merges, <|endoftext|> / <|im_start|> / <|im_end|>),
// tokenizer_config.json, and the weights in model.safetensors or in shards with an index.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "model/model_config.h"

namespace kipp::testing {

// hidden 64, 1 layer, 2 heads, 2 kv heads, head_dim 32, ffn 64, vocab 300, tied embeddings,
// bos = <|endoftext|> (256 + merges), eos = <|im_end|>.
ModelConfig mini_config();

struct MiniCheckpointOptions {
  ModelConfig config = mini_config();
  // 1: model.safetensors; more: model-0000i-of-0000N.safetensors + model.safetensors.index.json.
  int shards = 1;
  uint32_t seed = 1;          // the weights are a deterministic function of it
  bool chat_template = true;  // put a (tiny) chat_template into tokenizer_config.json
  bool generation_config = true;
};

// Writes the checkpoint's files into `dir` (which must exist), replacing files of the same names.
Status write_mini_checkpoint(const std::string& dir, const MiniCheckpointOptions& options = {});

// The token ids the mini tokenizer gives its special tokens (vocab_size must exceed them).
inline constexpr uint32_t kMiniEndOfText = 260;
inline constexpr uint32_t kMiniImStart = 261;
inline constexpr uint32_t kMiniImEnd = 262;

}  // namespace kipp::testing
