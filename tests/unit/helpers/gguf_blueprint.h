// Test helper: the parts of a valid Kipp GGUF (metadata, tensors with data) held in memory,
// so a test can break exactly one thing and write the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"
#include "model/gguf_schema.h"
#include "model/model_config.h"

namespace kipp::testing {

struct BlueprintTensor {
  std::string name;
  std::vector<uint64_t> dims;
  GgmlType type;
  std::vector<uint8_t> data;
};

struct GgufBlueprint {
  std::vector<GgufMetadataEntry> metadata;
  std::vector<BlueprintTensor> tensors;
  uint32_t alignment = 32;
  bool recompute_content_hash = true;

  GgufValue* find(std::string_view key);
  void set(std::string_view key, GgufValue value);  // replaces or appends
  void erase(std::string_view key);
  BlueprintTensor* tensor(std::string_view name);
  Status write(const std::string& path);  // recomputes kipp.content_hash unless told not to
};

// A small Qwen3-shaped config (hidden 64, 2 layers, 4 heads, 2 kv heads, head_dim 32,
// ffn 96, vocab 80, tied) that passes ModelConfig::validate.
ModelConfig micro_config();
// The HF config.json text of `config` (as local provenance records it).
std::string hf_config_json(const ModelConfig& config);
// A valid local-provenance blueprint with deterministic random weights.
GgufBlueprint micro_blueprint(const ModelConfig& config = micro_config(), QuantScheme scheme = QuantScheme::BF16);
// micro_blueprint with a complete byte-level tokenizer (vocab testing::small::kVocab) so
// Engine::open accepts it: config's vocab_size becomes small::kVocab (an engine builds its
// tokenizer on open, and a byte-level BPE needs its 256 byte tokens, which micro_config()'s
// 80 cannot hold); the tokenizer's special ids are config's.
GgufBlueprint engine_blueprint(ModelConfig config = micro_config());

// The engine and generator tests' model: micro_config() with the small test tokenizer's
// vocabulary (testing::small::kVocab, as engine_blueprint requires) and eos <|im_start|>;
// every other dimension is micro_config()'s (context length 256).
ModelConfig engine_model_config();
// engine_blueprint(engine_model_config()) written once per process into a temporary directory
// that lives until exit (a few tens of kB; sessions are cheap on it).
const std::string& engine_model_path();

// A fresh directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace kipp::testing
