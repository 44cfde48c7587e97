#include "unit/helpers/gguf_blueprint.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>

#include "core/half.h"
#include "format/quant.h"
#include "model/content_hash.h"
#include "model/tokenizer_metadata.h"
#include "unit/helpers/tokenizer_fixtures.h"

namespace kipp::testing {

GgufValue* GgufBlueprint::find(std::string_view key) {
  for (auto& entry : metadata) {
    if (entry.key == key) return &entry.value;
  }
  return nullptr;
}

void GgufBlueprint::set(std::string_view key, GgufValue value) {
  if (GgufValue* existing = find(key)) {
    *existing = std::move(value);
  } else {
    metadata.push_back({std::string(key), std::move(value)});
  }
}

void GgufBlueprint::erase(std::string_view key) {
  std::erase_if(metadata, [&](const GgufMetadataEntry& entry) { return entry.key == key; });
}

BlueprintTensor* GgufBlueprint::tensor(std::string_view name) {
  for (auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Status GgufBlueprint::write(const std::string& path) {
  if (recompute_content_hash) {
    ContentHasher hasher;
    for (const auto& t : tensors) hasher.add_tensor(t.name, t.type, t.dims, t.data);
    set(gguf_key::kKippContentHash, GgufValue::string(hasher.finish_hex()));
  }
  GgufWriter writer;
  writer.set_alignment(alignment);
  for (const auto& entry : metadata) writer.add_metadata(entry.key, entry.value);
  std::vector<std::span<const uint8_t>> data;
  for (const auto& t : tensors) {
    writer.add_tensor(t.name, t.dims, t.type);
    data.emplace_back(t.data);
  }
  return writer.write_all(path, data);
}

ModelConfig micro_config() {
  ModelConfig config;
  config.hidden_size = 64;
  config.num_layers = 2;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.head_dim = 32;
  config.ffn_size = 96;
  config.vocab_size = 80;
  config.context_length = 256;
  config.rope_theta = 10000;
  config.rms_norm_eps = 1e-6;
  config.tie_embeddings = true;
  config.bos_token_id = 0;
  config.eos_token_id = 1;
  return config;
}

std::string hf_config_json(const ModelConfig& c) {
  return "{\n  \"architectures\": [\"Qwen3ForCausalLM\"],\n  \"model_type\": \"qwen3\",\n"
         "  \"hidden_size\": " +
         std::to_string(c.hidden_size) + ",\n  \"num_hidden_layers\": " + std::to_string(c.num_layers) +
         ",\n  \"num_attention_heads\": " + std::to_string(c.num_heads) +
         ",\n  \"num_key_value_heads\": " + std::to_string(c.num_kv_heads) +
         ",\n  \"head_dim\": " + std::to_string(c.head_dim) +
         ",\n  \"intermediate_size\": " + std::to_string(c.ffn_size) +
         ",\n  \"vocab_size\": " + std::to_string(c.vocab_size) +
         ",\n  \"max_position_embeddings\": " + std::to_string(c.context_length) +
         ",\n  \"rope_theta\": " + std::to_string(static_cast<long long>(c.rope_theta)) +
         ",\n  \"rms_norm_eps\": 1e-06,\n  \"tie_word_embeddings\": " + (c.tie_embeddings ? "true" : "false") +
         ",\n  \"bos_token_id\": " + std::to_string(c.bos_token_id) +
         ",\n  \"eos_token_id\": " + std::to_string(c.eos_token_id) +
         ",\n  \"hidden_act\": \"silu\",\n  \"attention_bias\": false,\n  \"rope_scaling\": null,\n"
         "  \"use_sliding_window\": false,\n  \"torch_dtype\": \"bfloat16\"\n}\n";
}

namespace {

std::vector<uint8_t> random_tensor_bytes(const TensorSpec& spec, std::mt19937& rng) {
  uint64_t count = 1;
  for (uint64_t d : spec.dims) count *= d;
  std::normal_distribution<float> normal(0.0f, spec.dims.size() == 1 ? 0.05f : 0.02f);
  std::vector<float> values(count);
  for (auto& v : values) v = normal(rng) + (spec.dims.size() == 1 ? 1.0f : 0.0f);
  std::vector<uint8_t> bytes;
  switch (spec.type) {
    case GgmlType::F32:
      bytes.resize(count * 4);
      std::memcpy(bytes.data(), values.data(), bytes.size());
      break;
    case GgmlType::BF16: {
      std::vector<uint16_t> halves(count);
      f32_to_bf16_row(values.data(), halves.data(), count);
      bytes.resize(count * 2);
      std::memcpy(bytes.data(), halves.data(), bytes.size());
      break;
    }
    case GgmlType::Q8_0: {
      std::vector<BlockQ8_0> blocks(count / kQuantBlock);
      quantize_q8_0(values.data(), blocks.data(), count);
      bytes.resize(blocks.size() * sizeof(BlockQ8_0));
      std::memcpy(bytes.data(), blocks.data(), bytes.size());
      break;
    }
    default: {
      std::vector<BlockAffine4> blocks(count / kQuantBlock);
      quantize_affine4(values.data(), blocks.data(), count);
      bytes.resize(blocks.size() * sizeof(BlockAffine4));
      std::memcpy(bytes.data(), blocks.data(), bytes.size());
    }
  }
  return bytes;
}

}  // namespace

GgufBlueprint micro_blueprint(const ModelConfig& config, QuantScheme scheme) {
  GgufBlueprint blueprint;
  // The schema's own metadata writers fill a writer; the blueprint takes its entries.
  GgufWriter writer;
  add_model_metadata(writer, config, "micro", scheme);
  TokenizerMetadata tokenizer;
  for (uint32_t id = 0; id < config.vocab_size; ++id) {
    tokenizer.tokens.push_back(id < 2 ? (id == 0 ? "<|endoftext|>" : "<|im_end|>") : "t" + std::to_string(id));
    tokenizer.token_types.push_back(id < 2 ? 3 : 1);
  }
  tokenizer.merges = {"t 1", "t 2"};
  tokenizer.bos_token_id = config.bos_token_id;
  tokenizer.eos_token_id = config.eos_token_id;
  tokenizer.padding_token_id = config.bos_token_id;
  add_tokenizer_metadata(writer, tokenizer);
  Provenance provenance;
  provenance.kind = ProvenanceKind::Local;
  provenance.local_config = hf_config_json(config);
  provenance.variant = Variant::Base;
  provenance.scheme = scheme;
  provenance.stop_token_ids = {config.eos_token_id};
  provenance.content_hash = "to be computed";
  add_provenance_metadata(writer, provenance);
  blueprint.metadata = writer.metadata();
  std::mt19937 rng(1234);
  for (const auto& spec : expected_tensors(config, scheme)) {
    blueprint.tensors.push_back({spec.gguf_name, spec.dims, spec.type, random_tensor_bytes(spec, rng)});
  }
  return blueprint;
}

GgufBlueprint engine_blueprint(ModelConfig config) {
  config.vocab_size = small::kVocab;
  GgufBlueprint blueprint = micro_blueprint(config);
  TokenizerMetadata tokenizer = small_tokenizer_metadata();
  // The special ids must agree with the config the file records.
  tokenizer.bos_token_id = config.bos_token_id;
  tokenizer.eos_token_id = config.eos_token_id;
  tokenizer.padding_token_id = config.bos_token_id;
  GgufWriter writer;
  add_tokenizer_metadata(writer, tokenizer);
  for (const GgufMetadataEntry& entry : writer.metadata()) blueprint.set(entry.key, entry.value);
  return blueprint;
}

ModelConfig engine_model_config() {
  ModelConfig config = micro_config();
  config.vocab_size = small::kVocab;
  config.eos_token_id = small::kImStart;
  return config;
}

const std::string& engine_model_path() {
  static const std::unique_ptr<TempDir> dir = std::make_unique<TempDir>();
  static const std::string path = [] {
    const std::string file = dir->file("micro.gguf");
    const Status written = engine_blueprint(engine_model_config()).write(file);
    EXPECT_TRUE(written.ok()) << written.message();
    return file;
  }();
  return path;
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "kipp-test-XXXXXX").string();
  path_ = ::mkdtemp(pattern.data()) ? pattern : std::string();
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

}  // namespace kipp::testing
