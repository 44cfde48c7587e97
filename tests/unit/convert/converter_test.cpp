// The converter: a valid checkpoint converts to a file the strict loader accepts; every
// defect of the input folder is one clear error and leaves no output file behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "convert/converter.h"
#include "core/files.h"
#include "format/safetensors.h"
#include "model/model.h"
#include "model/registry.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/mini_checkpoint.h"

namespace kipp {
namespace {

using testing::TempDir;

class Convert : public ::testing::Test {
 protected:
  void SetUp() override {
    hf_ = dir_.path() + "/hf";
    std::filesystem::create_directories(hf_);
    ASSERT_TRUE(testing::write_mini_checkpoint(hf_).ok());
  }

  Expected<ConvertReport> convert(ConvertOptions options = {}) {
    options.input_dir = hf_;
    options.output_path = out();
    return convert_checkpoint(options);
  }
  std::string error_of(ConvertOptions options = {}) {
    auto result = convert(std::move(options));
    EXPECT_FALSE(result.ok());
    EXPECT_FALSE(file_exists(out())) << "a failed conversion must not leave a file";
    return result.ok() ? std::string() : result.message();
  }
  std::string out() const { return dir_.path() + "/out.gguf"; }
  std::string hf_file(const std::string& name) const { return hf_ + "/" + name; }

  // Rewrites model.safetensors with `extra` tensors added (copies of existing data).
  void add_tensor_copy(const std::string& from, const std::string& to_name) {
    auto file = SafetensorsFile::open(hf_file("model.safetensors"));
    ASSERT_TRUE(file.ok()) << file.message();
    std::vector<SafetensorsWriteTensor> tensors;
    std::vector<std::vector<uint8_t>> keep;
    for (const auto& t : file->tensors()) tensors.push_back({t.name, t.dtype, t.shape, file->data(t)});
    const SafetensorsTensor* source = file->find(from);
    ASSERT_NE(source, nullptr);
    keep.emplace_back(file->data(*source).begin(), file->data(*source).end());
    tensors.push_back({to_name, source->dtype, source->shape, keep.back()});
    const std::string temp = hf_file("model.new");
    ASSERT_TRUE(write_safetensors(temp, tensors).ok());
    std::filesystem::rename(temp, hf_file("model.safetensors"));
  }

  void replace_in_file(const std::string& name, const std::string& from, const std::string& to) {
    auto text = read_text_file(hf_file(name));
    ASSERT_TRUE(text.ok());
    const auto at = text->find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text->replace(at, from.size(), to);
    ASSERT_TRUE(write_text_file_atomic(hf_file(name), *text).ok());
  }

  TempDir dir_;
  std::string hf_;
};

TEST_F(Convert, MiniCheckpointConvertsAndLoads) {
  auto report = convert();
  ASSERT_TRUE(report.ok()) << report.message();
  EXPECT_EQ(report->provenance.kind, ProvenanceKind::Local);
  EXPECT_EQ(report->provenance.variant, Variant::Instruct);  // it has a chat template
  auto model = Model::open(out());
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_EQ(model->provenance().content_hash, report->provenance.content_hash);
  EXPECT_EQ(model->config().num_layers, testing::mini_config().num_layers);
  EXPECT_TRUE(model->tokenizer().chat_template.has_value());
  EXPECT_EQ(model->tokenizer().eos_token_id, testing::kMiniImEnd);
}

TEST_F(Convert, ShardedCheckpointGivesTheSameFile) {
  ASSERT_TRUE(convert().ok());
  auto single = read_text_file(out());
  std::filesystem::remove(hf_file("model.safetensors"));
  ASSERT_TRUE(testing::write_mini_checkpoint(hf_, {.shards = 3}).ok());
  ASSERT_TRUE(convert().ok());
  auto sharded = read_text_file(out());
  ASSERT_TRUE(single.ok() && sharded.ok());
  EXPECT_TRUE(*single == *sharded) << "shard layout must not change the converted file";
}

TEST_F(Convert, ConversionIsDeterministic) {
  ASSERT_TRUE(convert().ok());
  auto first = sha256_file_hex(out());
  ASSERT_TRUE(convert().ok());
  EXPECT_EQ(*first, *sha256_file_hex(out()));
}

TEST_F(Convert, TiedLmHeadIdenticalToTheEmbeddingIsDropped) {
  add_tensor_copy("model.embed_tokens.weight", "lm_head.weight");
  auto report = convert();
  ASSERT_TRUE(report.ok()) << report.message();
  EXPECT_TRUE(report->provenance.dropped_tied_lm_head);
  EXPECT_NE(report->notes.find("equals the embedding"), std::string::npos) << report->notes;
  auto model = Model::open(out());
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_TRUE(model->provenance().dropped_tied_lm_head);
  EXPECT_EQ(model->gguf().find_tensor("output.weight"), nullptr);
}

TEST_F(Convert, TiedLmHeadThatDiffersIsDroppedWithAWarning) {
  // Same shape, other values: a layer's gate has [ffn, hidden] = [64, 64], not [vocab, hidden],
  // so build a differing head from the embedding by shifting its bytes.
  auto file = SafetensorsFile::open(hf_file("model.safetensors"));
  ASSERT_TRUE(file.ok());
  std::vector<SafetensorsWriteTensor> tensors;
  for (const auto& t : file->tensors()) tensors.push_back({t.name, t.dtype, t.shape, file->data(t)});
  const SafetensorsTensor* embedding = file->find("model.embed_tokens.weight");
  std::vector<uint8_t> head(file->data(*embedding).begin(), file->data(*embedding).end());
  head[0] ^= 0x40;
  tensors.push_back({"lm_head.weight", embedding->dtype, embedding->shape, head});
  ASSERT_TRUE(write_safetensors(hf_file("model.new"), tensors).ok());
  std::filesystem::rename(hf_file("model.new"), hf_file("model.safetensors"));
  auto report = convert();
  ASSERT_TRUE(report.ok()) << report.message();
  EXPECT_NE(report->notes.find("DIFFERS"), std::string::npos) << report->notes;
}

TEST_F(Convert, UnexpectedTensorIsRejected) {
  add_tensor_copy("model.norm.weight", "model.layers.0.self_attn.rotary_emb.inv_freq");
  EXPECT_NE(error_of().find("unexpected tensor 'model.layers.0.self_attn.rotary_emb.inv_freq'"), std::string::npos);
}

TEST_F(Convert, UntiedModelWithoutLmHeadIsRejected) {
  replace_in_file("config.json", "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false");
  EXPECT_NE(error_of().find("missing tensor 'lm_head.weight'"), std::string::npos);
}

TEST_F(Convert, ConfigThatDisagreesWithTheWeightsIsRejected) {
  replace_in_file("config.json", "\"intermediate_size\": 64", "\"intermediate_size\": 96");
  const std::string error = error_of();
  EXPECT_NE(error.find("shape does not match config.json"), std::string::npos) << error;
}

TEST_F(Convert, MissingFilesAreNamed) {
  std::filesystem::remove(hf_file("tokenizer.json"));
  EXPECT_NE(error_of().find("tokenizer.json"), std::string::npos);
  ASSERT_TRUE(testing::write_mini_checkpoint(hf_).ok());
  std::filesystem::remove(hf_file("config.json"));
  EXPECT_NE(error_of().find("config.json"), std::string::npos);
  ASSERT_TRUE(testing::write_mini_checkpoint(hf_).ok());
  std::filesystem::remove(hf_file("model.safetensors"));
  EXPECT_NE(error_of().find("model.safetensors"), std::string::npos);
}

TEST_F(Convert, MalformedJsonIsAnError) {
  ASSERT_TRUE(write_text_file_atomic(hf_file("config.json"), "{\"model_type\": \"qwen3\",").ok());
  EXPECT_NE(error_of().find("config.json"), std::string::npos);
  ASSERT_TRUE(testing::write_mini_checkpoint(hf_).ok());
  ASSERT_TRUE(write_text_file_atomic(hf_file("tokenizer.json"), "[1, 2").ok());
  EXPECT_NE(error_of().find("tokenizer.json"), std::string::npos);
}

TEST_F(Convert, OtherPreTokenizerIsRejected) {
  replace_in_file("tokenizer.json", "\\\\p{N}|", "\\\\p{N}{1,3}|");
  EXPECT_NE(error_of().find("not the Qwen2 byte-level pre-tokenizer"), std::string::npos);
}

TEST_F(Convert, AddedTokensDecoderIsMergedOverTokenizerJson) {
  // tokenizer_config.json may declare added tokens tokenizer.json lacks (Qwen3's <think> ...).
  replace_in_file("tokenizer_config.json", "\"added_tokens_decoder\": {",
                  "\"added_tokens_decoder\": {\"299\": {\"content\": \"<think>\", \"special\": false}, ");
  ASSERT_TRUE(convert().ok());
  auto model = Model::open(out());
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_EQ(model->tokenizer().tokens[299], "<think>");
  EXPECT_EQ(model->tokenizer().token_types[299], static_cast<int32_t>(TokenType::UserDefined));
  EXPECT_EQ(model->tokenizer().token_types[testing::kMiniImEnd], static_cast<int32_t>(TokenType::Control));
}

TEST_F(Convert, RegistryStampNeedsAKnownEntryAndMatchingConfig) {
  ConvertOptions unknown;
  unknown.repository = "Qwen/Qwen3-Coder";
  unknown.revision = std::string(40, '0');
  EXPECT_NE(error_of(unknown).find("'Qwen/Qwen3-Coder' is not in the registry"), std::string::npos);
  ConvertOptions wrong_revision;
  wrong_revision.repository = "Qwen/Qwen3-0.6B";
  wrong_revision.revision = std::string(40, '0');
  EXPECT_NE(error_of(wrong_revision).find("is not the pinned revision c1899de"), std::string::npos);
  ConvertOptions mini_as_registry;
  mini_as_registry.repository = "Qwen/Qwen3-0.6B";
  mini_as_registry.revision = "c1899de289a04d12100db370d81485cdf75e47ca";
  EXPECT_NE(error_of(mini_as_registry).find("config.json does not match the registry entry"), std::string::npos);
  ConvertOptions half;
  half.repository = "Qwen/Qwen3-0.6B";
  EXPECT_NE(error_of(half).find("needs both --repo and --revision"), std::string::npos);
}

// A folder whose config.json equals a registry entry, with stand-in weight files: the stamp
// is decided by the files before any tensor is read.
class RegistryStamp : public ::testing::Test {
 protected:
  std::string convert_as(const RegistryEntry& entry) {
    ConvertOptions options;
    options.input_dir = dir_.path();
    options.output_path = dir_.file("out.gguf");
    options.repository = entry.id;
    options.revision = entry.revision;
    auto result = convert_checkpoint(options);
    EXPECT_FALSE(result.ok());
    EXPECT_FALSE(file_exists(options.output_path));
    return result.ok() ? std::string() : result.message();
  }
  void write(const std::string& name, const std::string& contents) {
    ASSERT_TRUE(write_text_file_atomic(dir_.file(name), contents).ok());
  }
  TempDir dir_;
};

TEST_F(RegistryStamp, WeightsWithoutARecordedChecksumCannotBeStamped) {
  const RegistryEntry* thinking = Registry::builtin().find("Qwen/Qwen3-4B-Thinking-2507");
  ASSERT_NE(thinking, nullptr);
  write("config.json", testing::hf_config_json(thinking->config));
  write("model.safetensors", "stand-in");
  const std::string error = convert_as(*thinking);
  EXPECT_NE(error.find("records no SHA-256 for model.safetensors"), std::string::npos) << error;
}

TEST_F(RegistryStamp, WeightFileOfTheWrongSizeIsNotThePinnedCheckpoint) {
  const RegistryEntry* entry = Registry::builtin().find("Qwen/Qwen3-0.6B");
  ASSERT_NE(entry, nullptr);
  write("config.json", testing::hf_config_json(entry->config));
  write("generation_config.json", "{}");
  write("model.safetensors", "stand-in");
  const std::string error = convert_as(*entry);
  // config.json itself is checked first: ours is not the official file byte for byte.
  EXPECT_NE(error.find("config.json is"), std::string::npos) << error;
  EXPECT_NE(error.find("not the pinned checkpoint"), std::string::npos) << error;
}

TEST_F(Convert, QuantizedConversionsLoad) {
  for (auto scheme : {QuantScheme::Q8_0, QuantScheme::Affine4}) {
    ConvertOptions options;
    options.scheme = scheme;
    ASSERT_TRUE(convert(options).ok());
    auto model = Model::open(out());
    ASSERT_TRUE(model.ok()) << model.message();
    EXPECT_EQ(model->weights().layers[0].attn_output.type, projection_type(scheme));
  }
}

}  // namespace
}  // namespace kipp
