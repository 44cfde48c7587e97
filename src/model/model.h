// Opening a Kipp GGUF: one read-only mmap, strict validation of everything in it against the
// registry (registry provenance) or against itself (local provenance), and an explicit
// weights structure of views into the mapping. No weight is copied.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"
#include "format/gguf.h"
#include "model/gguf_schema.h"
#include "model/model_config.h"
#include "model/registry.h"
#include "model/tokenizer_metadata.h"

namespace kipp {

// A weight matrix or vector inside the mapping. Matrices are row-major: `rows` output
// features of `cols` inputs each (ggml dims [cols, rows]); vectors have rows == 1.
struct TensorView {
  std::string_view name;
  GgmlType type = GgmlType::F32;
  uint64_t cols = 0;
  uint64_t rows = 0;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

struct LayerWeights {
  TensorView attn_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm;
  TensorView ffn_norm, ffn_gate, ffn_up, ffn_down;
};

struct Qwen3Weights {
  TensorView token_embedding;  // [vocab rows][hidden]
  std::vector<LayerWeights> layers;
  TensorView output_norm;
  TensorView output;  // the token embedding when tied
};

struct LoadOptions {
  // Re-hash all tensor data against kipp.content_hash (XXH3: a pass over the file at close to
  // memory speed; `kipp inspect --no-verify` shows what it costs).
  bool verify_content_hash = true;
};

class Model {
 public:
  static Expected<Model> open(const std::string& path, const LoadOptions& options = {});

  const ModelConfig& config() const { return state_->config; }
  const Provenance& provenance() const { return state_->provenance; }
  const RegistryEntry* registry_entry() const { return state_->registry_entry; }  // null if local
  const Qwen3Weights& weights() const { return state_->weights; }
  const TokenizerMetadata& tokenizer() const { return state_->tokenizer; }
  const GgufFile& gguf() const { return state_->gguf; }
  uint64_t file_size() const { return state_->mapping.size(); }
  const std::string& path() const { return state_->mapping.path(); }

 private:
  struct State {
    MappedFile mapping;
    GgufFile gguf;
    ModelConfig config;
    Provenance provenance;
    const RegistryEntry* registry_entry = nullptr;
    TokenizerMetadata tokenizer;
    Qwen3Weights weights;
  };
  std::unique_ptr<State> state_;  // stable addresses: views point into the mapping
};

// The same checks on an already parsed file (tests and `kipp inspect` use them directly).
Expected<ModelConfig> validate_model_metadata(const GgufFile& file, const Provenance& provenance,
                                              const RegistryEntry** entry_out);
Status validate_tensor_directory(const GgufFile& file, const ModelConfig& config, QuantScheme scheme);
// ModelConfig as GGUF stores it: rope theta and RMS epsilon are float32 there.
ModelConfig as_stored_in_gguf(ModelConfig config);

}  // namespace kipp
