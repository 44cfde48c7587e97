// The strict loader: a valid file binds views into the mapping; each kind of defect is
// rejected with a message naming the field, the expected and the found value.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "model/model.h"
#include "model/registry.h"
#include "unit/helpers/gguf_blueprint.h"

namespace kipp {
namespace {

using testing::GgufBlueprint;
using testing::micro_blueprint;
using testing::micro_config;
using testing::TempDir;

class ModelLoad : public ::testing::Test {
 protected:
  // Writes the blueprint and opens it; the error message when it fails.
  std::string open_error(GgufBlueprint& blueprint) {
    const std::string path = dir_.file("model.gguf");
    auto status = blueprint.write(path);
    EXPECT_TRUE(status.ok()) << status.message();
    auto model = Model::open(path);
    return model.ok() ? std::string() : model.message();
  }

  TempDir dir_;
};

TEST_F(ModelLoad, ValidMicroModelBindsViewsIntoTheMapping) {
  GgufBlueprint blueprint = micro_blueprint();
  const std::string path = dir_.file("model.gguf");
  ASSERT_TRUE(blueprint.write(path).ok());
  auto model = Model::open(path);
  ASSERT_TRUE(model.ok()) << model.message();
  const ModelConfig expected = as_stored_in_gguf(micro_config());
  EXPECT_TRUE(model->config() == expected);
  EXPECT_EQ(model->provenance().kind, ProvenanceKind::Local);
  EXPECT_EQ(model->registry_entry(), nullptr);
  const auto& weights = model->weights();
  ASSERT_EQ(weights.layers.size(), 2u);
  EXPECT_EQ(weights.token_embedding.rows, 80u);
  EXPECT_EQ(weights.token_embedding.cols, 64u);
  EXPECT_EQ(weights.output.data, weights.token_embedding.data);  // tied
  EXPECT_EQ(weights.layers[1].attn_q.rows, 128u);                // q heads * head_dim, not hidden
  EXPECT_EQ(weights.layers[1].attn_k.rows, 64u);
  EXPECT_EQ(weights.layers[0].ffn_down.cols, 96u);
  // Views are into the file, and hold exactly the bytes written.
  const auto* begin = model->gguf().tensor_data(model->gguf().tensors().front()).data() -
                      model->gguf().tensors().front().offset - model->gguf().data_offset();
  const auto& q = weights.layers[1].attn_q;
  EXPECT_GE(q.data, begin);
  EXPECT_LE(q.data + q.bytes, begin + model->file_size());
  const auto* source = blueprint.tensor("blk.1.attn_q.weight");
  ASSERT_EQ(q.bytes, source->data.size());
  EXPECT_EQ(std::memcmp(q.data, source->data.data(), q.bytes), 0);
}

TEST_F(ModelLoad, QuantizedSchemesBindTheirBlockTypes) {
  for (auto scheme : {QuantScheme::Q8_0, QuantScheme::Affine4}) {
    GgufBlueprint blueprint = micro_blueprint(micro_config(), scheme);
    const std::string path = dir_.file("quant.gguf");
    ASSERT_TRUE(blueprint.write(path).ok());
    auto model = Model::open(path);
    ASSERT_TRUE(model.ok()) << model.message();
    EXPECT_EQ(model->provenance().scheme, scheme);
    EXPECT_EQ(model->weights().layers[0].ffn_gate.type, projection_type(scheme));
    EXPECT_EQ(model->weights().token_embedding.type, GgmlType::BF16);
    EXPECT_EQ(model->weights().layers[0].attn_norm.type, GgmlType::F32);
  }
}

TEST_F(ModelLoad, UntiedModelHasItsOwnOutput) {
  ModelConfig config = micro_config();
  config.tie_embeddings = false;
  GgufBlueprint blueprint = micro_blueprint(config);
  const std::string path = dir_.file("untied.gguf");
  ASSERT_TRUE(blueprint.write(path).ok());
  auto model = Model::open(path);
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_FALSE(model->config().tie_embeddings);
  EXPECT_NE(model->weights().output.data, model->weights().token_embedding.data);
  EXPECT_EQ(model->weights().output.name, "output.weight");
}

TEST_F(ModelLoad, MissingTensorIsNamed) {
  GgufBlueprint blueprint = micro_blueprint();
  std::erase_if(blueprint.tensors, [](const auto& t) { return t.name == "blk.1.ffn_up.weight"; });
  EXPECT_NE(open_error(blueprint).find("missing tensor 'blk.1.ffn_up.weight'"), std::string::npos);
}

TEST_F(ModelLoad, UnknownTensorIsRejected) {
  GgufBlueprint blueprint = micro_blueprint();
  blueprint.tensors.push_back({"blk.0.attn_bias.weight", {64}, GgmlType::F32, std::vector<uint8_t>(256)});
  EXPECT_NE(open_error(blueprint).find("unknown tensor 'blk.0.attn_bias.weight'"), std::string::npos);
}

TEST_F(ModelLoad, ExtraLayerIsAnUnknownTensor) {
  GgufBlueprint blueprint = micro_blueprint();
  auto extra = *blueprint.tensor("blk.1.attn_norm.weight");
  extra.name = "blk.2.attn_norm.weight";
  blueprint.tensors.push_back(extra);
  EXPECT_NE(open_error(blueprint).find("unknown tensor 'blk.2.attn_norm.weight'"), std::string::npos);
}

TEST_F(ModelLoad, WrongTensorTypeNamesExpectedAndFound) {
  GgufBlueprint blueprint = micro_blueprint();
  auto* q = blueprint.tensor("blk.0.attn_q.weight");
  q->type = GgmlType::F32;
  q->data.resize(q->data.size() * 2);
  const std::string error = open_error(blueprint);
  EXPECT_NE(error.find("tensor 'blk.0.attn_q.weight': type f32 (expected bf16"), std::string::npos) << error;
}

TEST_F(ModelLoad, WrongTensorShapeNamesExpectedAndFound) {
  GgufBlueprint blueprint = micro_blueprint();
  auto* gate = blueprint.tensor("blk.0.ffn_gate.weight");
  gate->dims = {gate->dims[1], gate->dims[0]};
  const std::string error = open_error(blueprint);
  EXPECT_NE(error.find("tensor 'blk.0.ffn_gate.weight': shape [96, 64] (expected [64, 96])"), std::string::npos)
      << error;
}

TEST_F(ModelLoad, QuantSchemeMustMatchTensorTypes) {
  GgufBlueprint blueprint = micro_blueprint();
  blueprint.set(gguf_key::kKippQuantScheme, GgufValue::string("q8_0"));
  blueprint.set(gguf_key::kFileType, GgufValue::u32(7));
  const std::string error = open_error(blueprint);
  EXPECT_NE(error.find("type bf16 (expected q8_0 for scheme q8_0)"), std::string::npos) << error;
}

TEST_F(ModelLoad, FileTypeMustMatchScheme) {
  GgufBlueprint blueprint = micro_blueprint();
  blueprint.set(gguf_key::kFileType, GgufValue::u32(7));
  const std::string error = open_error(blueprint);
  EXPECT_NE(error.find("general.file_type is 7 (expected 32"), std::string::npos) << error;
}

TEST_F(ModelLoad, MetadataDimsMustMatchTheRecordedLocalConfig) {
  GgufBlueprint blueprint = micro_blueprint();
  blueprint.set(gguf_key::kFeedForwardLength, GgufValue::u32(128));
  const std::string error = open_error(blueprint);
  EXPECT_NE(error.find("intermediate_size (qwen3.feed_forward_length): expected 96, found 128"), std::string::npos)
      << error;
}

TEST_F(ModelLoad, RegistryStampWithOtherDimsIsRejectedFieldByField) {
  GgufBlueprint blueprint = micro_blueprint();
  const RegistryEntry* entry = Registry::builtin().find("Qwen/Qwen3-0.6B");
  ASSERT_NE(entry, nullptr);
  blueprint.set(gguf_key::kKippProvenance, GgufValue::string("registry"));
  blueprint.erase(gguf_key::kKippLocalConfig);
  blueprint.set(gguf_key::kKippRepository, GgufValue::string(entry->id));
  blueprint.set(gguf_key::kKippRevision, GgufValue::string(entry->revision));
  const std::string error = open_error(blueprint);
  EXPECT_NE(error.find("registry entry Qwen/Qwen3-0.6B"), std::string::npos) << error;
  EXPECT_NE(error.find("hidden_size (qwen3.embedding_length): expected 1024, found 64"), std::string::npos) << error;
  EXPECT_NE(error.find("num_hidden_layers (qwen3.block_count): expected 28, found 2"), std::string::npos) << error;
}

TEST_F(ModelLoad, RegistryStampNeedsAKnownRepositoryAndThePinnedRevision) {
  GgufBlueprint blueprint = micro_blueprint();
  blueprint.set(gguf_key::kKippProvenance, GgufValue::string("registry"));
  blueprint.set(gguf_key::kKippRepository, GgufValue::string("Qwen/Qwen3-Coder-7B"));
  blueprint.set(gguf_key::kKippRevision, GgufValue::string(std::string(40, 'a')));
  EXPECT_NE(open_error(blueprint).find("'Qwen/Qwen3-Coder-7B' is not in the registry"), std::string::npos);
  blueprint.set(gguf_key::kKippRepository, GgufValue::string("Qwen/Qwen3-8B"));
  const std::string error = open_error(blueprint);
  EXPECT_NE(error.find("(expected the pinned revision b968826d9c46dd6066d109eabc6255188de91218)"), std::string::npos)
      << error;
}

TEST_F(ModelLoad, RegistryEntryMetadataIsAccepted) {
  // Metadata-level acceptance of every registry entry: the full weights are too large for a
  // unit test, so the tensor directory is checked separately by the other tests.
  for (const auto& entry : Registry::builtin().entries()) {
    GgufBlueprint blueprint = micro_blueprint();
    GgufWriter writer;
    add_model_metadata(writer, entry.config, entry.id, QuantScheme::BF16);
    for (const auto& item : writer.metadata()) blueprint.set(item.key, item.value);
    blueprint.set(gguf_key::kKippProvenance, GgufValue::string("registry"));
    blueprint.erase(gguf_key::kKippLocalConfig);
    blueprint.set(gguf_key::kKippRepository, GgufValue::string(entry.id));
    blueprint.set(gguf_key::kKippRevision, GgufValue::string(entry.revision));
    blueprint.set(gguf_key::kKippVariant, GgufValue::string(std::string(variant_name(entry.variant))));
    blueprint.set(gguf_key::kKippStopTokenIds, GgufValue::u32_array(entry.stop_token_ids));
    blueprint.set(gguf_key::kBosTokenId, GgufValue::u32(entry.config.bos_token_id));
    blueprint.set(gguf_key::kEosTokenId, GgufValue::u32(entry.config.eos_token_id));
    blueprint.tensors.clear();
    if (!entry.config.tie_embeddings) {
      blueprint.tensors.push_back({"output.weight",
                                   {entry.config.hidden_size, 1},
                                   GgmlType::F32,
                                   std::vector<uint8_t>(entry.config.hidden_size * 4)});
    }
    const std::string path = dir_.file("registry.gguf");
    ASSERT_TRUE(blueprint.write(path).ok());
    auto mapping = MappedFile::open(path);
    ASSERT_TRUE(mapping.ok());
    auto file = GgufFile::parse(mapping->bytes());
    ASSERT_TRUE(file.ok()) << file.message();
    auto provenance = read_provenance_metadata(*file);
    ASSERT_TRUE(provenance.ok()) << provenance.message();
    const RegistryEntry* matched = nullptr;
    auto config = validate_model_metadata(*file, *provenance, &matched);
    ASSERT_TRUE(config.ok()) << entry.id << ": " << config.message();
    EXPECT_EQ(matched, &entry);
    // And a variant that disagrees with the entry is refused.
    blueprint.set(gguf_key::kKippVariant, GgufValue::string(entry.variant == Variant::Base ? "instruct" : "base"));
    EXPECT_NE(open_error(blueprint).find("kipp.variant is"), std::string::npos) << entry.id;
  }
}

TEST_F(ModelLoad, AlteredTensorDataFailsTheContentHash) {
  GgufBlueprint blueprint = micro_blueprint();
  ASSERT_TRUE(blueprint.write(dir_.file("reference.gguf")).ok());
  blueprint.recompute_content_hash = false;
  blueprint.tensor("blk.0.ffn_down.weight")->data[7] ^= 0x01;
  EXPECT_NE(open_error(blueprint).find("does not match kipp.content_hash"), std::string::npos);
  auto unverified = Model::open(dir_.file("model.gguf"), LoadOptions{.verify_content_hash = false});
  EXPECT_TRUE(unverified.ok());
}

TEST_F(ModelLoad, MissingRequiredKeyIsNamed) {
  GgufBlueprint blueprint = micro_blueprint();
  blueprint.erase(gguf_key::kBlockCount);
  EXPECT_NE(open_error(blueprint).find("required key 'qwen3.block_count' is missing"), std::string::npos);
}

TEST_F(ModelLoad, WrongKeyTypeIsNamed) {
  GgufBlueprint blueprint = micro_blueprint();
  blueprint.set(gguf_key::kBlockCount, GgufValue::u64(2));
  const std::string error = open_error(blueprint);
  EXPECT_NE(error.find("'qwen3.block_count' has type"), std::string::npos) << error;
}

TEST_F(ModelLoad, OtherArchitectureIsRejected) {
  GgufBlueprint blueprint = micro_blueprint();
  blueprint.set(gguf_key::kArchitecture, GgufValue::string("llama"));
  EXPECT_NE(open_error(blueprint).find("general.architecture is 'llama' (expected 'qwen3')"), std::string::npos);
}

TEST_F(ModelLoad, TokenCountMustEqualTheVocabulary) {
  GgufBlueprint blueprint = micro_blueprint();
  auto tokens = *blueprint.find(gguf_key::kTokens)->as_string_array();
  tokens.pop_back();
  blueprint.set(gguf_key::kTokens, GgufValue::string_array(tokens));
  EXPECT_NE(open_error(blueprint).find("tokenizer.ggml.tokens has 79 entries (expected 80"), std::string::npos);
}

TEST_F(ModelLoad, StopTokenOutsideTheVocabularyIsRejected) {
  GgufBlueprint blueprint = micro_blueprint();
  blueprint.set(gguf_key::kKippStopTokenIds, GgufValue::u32_array({1, 500}));
  EXPECT_NE(open_error(blueprint).find("kipp.stop_token_ids: 500 is outside the vocabulary"), std::string::npos);
}

TEST_F(ModelLoad, EveryTruncationIsAnErrorNotACrash) {
  GgufBlueprint blueprint = micro_blueprint();
  const std::string path = dir_.file("full.gguf");
  ASSERT_TRUE(blueprint.write(path).ok());
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut_path = dir_.file("cut.gguf");
  // Every cut in the first 512 bytes, then finer-than-a-field steps through the header, then
  // coarse steps through the data.
  for (size_t cut = 0; cut < bytes.size(); cut += (cut < 512 ? 1 : cut < 8192 ? 17 : 4099)) {
    std::ofstream(cut_path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(cut));
    auto model = Model::open(cut_path);
    ASSERT_FALSE(model.ok()) << "cut at " << cut;
    EXPECT_NE(model.message().find(cut_path), std::string::npos);
  }
}

TEST(Registry, HoldsThirteenValidatedCheckpoints) {
  const auto& entries = Registry::builtin().entries();
  ASSERT_EQ(entries.size(), 13u);
  for (const auto& entry : entries) {
    EXPECT_TRUE(entry.config.validate().ok()) << entry.id;
    EXPECT_EQ(entry.config.head_dim, 128u) << entry.id;
    EXPECT_EQ(entry.config.num_kv_heads, 8u) << entry.id;
    EXPECT_EQ(entry.config.vocab_size, 151936u) << entry.id;
    EXPECT_EQ(entry.revision.size(), 40u) << entry.id;
    EXPECT_FALSE(entry.stop_token_ids.empty()) << entry.id;
  }
}

TEST(Registry, ParameterCountsMatchThePublishedOnes) {
  // Published totals (QWEN3_FACTS.md) count the tied embedding once.
  const std::pair<const char*, uint64_t> published[] = {{"Qwen3-0.6B", 596049920ull},  {"Qwen3-1.7B", 1720574976ull},
                                                        {"Qwen3-4B", 4022468096ull},   {"Qwen3-8B", 8190735360ull},
                                                        {"Qwen3-14B", 14768307200ull}, {"Qwen3-32B", 32762123264ull}};
  for (const auto& [name, count] : published) {
    const RegistryEntry* entry = Registry::builtin().find(name);
    ASSERT_NE(entry, nullptr) << name;
    EXPECT_EQ(entry->config.parameter_count(), count) << name;
  }
}

TEST(Registry, FindsByIdOrNameIgnoringCase) {
  const auto& registry = Registry::builtin();
  ASSERT_NE(registry.find("qwen/qwen3-4b-instruct-2507"), nullptr);
  EXPECT_EQ(registry.find("Qwen3-0.6B")->id, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(registry.find("Qwen3-0.6"), nullptr);
  EXPECT_EQ(registry.find("Qwen/Qwen3-32B-Base"), nullptr);  // never released
}

TEST(Registry, UnconfirmedMarksStayVisible) {
  const RegistryEntry* base14 = Registry::builtin().find("Qwen/Qwen3-14B-Base");
  ASSERT_NE(base14, nullptr);
  EXPECT_TRUE(base14->is_unconfirmed("config.num_key_value_heads"));
  EXPECT_TRUE(base14->is_unconfirmed("files.config.json"));
  EXPECT_FALSE(base14->is_unconfirmed("config.hidden_size"));
  const RegistryEntry* thinking = Registry::builtin().find("Qwen3-4B-Thinking-2507");
  EXPECT_TRUE(thinking->is_unconfirmed("files.model.safetensors.index.json"));  // parent mark "files"
  EXPECT_EQ(thinking->variant, Variant::Thinking);
  EXPECT_TRUE(Registry::builtin().find("Qwen3-0.6B")->ships_tied_lm_head);
}

TEST(Registry, MalformedRegistryIsAnError) {
  EXPECT_FALSE(Registry::parse("[]").ok());
  EXPECT_FALSE(Registry::parse("{\"checkpoints\": [{\"id\": \"x\"}]}").ok());
  EXPECT_FALSE(Registry::parse("not json").ok());
}

TEST(ModelConfigParse, RejectsNonDenseOrMalformedConfigs) {
  const std::string good = testing::hf_config_json(micro_config());
  ASSERT_TRUE(parse_hf_config(good).ok()) << parse_hf_config(good).message();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    auto parsed = parse_hf_config(text);
    return parsed.ok() ? std::string() : parsed.message();
  };
  EXPECT_NE(with("\"qwen3\"", "\"qwen3_moe\"").find("model_type is 'qwen3_moe'"), std::string::npos);
  EXPECT_NE(with("\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"yarn\"}").find("rope_scaling"),
            std::string::npos);
  EXPECT_NE(with("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3").find("not a multiple"), std::string::npos);
  EXPECT_NE(with("\"hidden_size\": 64", "\"hidden_size\": -64").find("'hidden_size' must be a non-negative integer"),
            std::string::npos);
  EXPECT_NE(with("\"head_dim\": 32,", "").find("missing key 'head_dim'"), std::string::npos);
  EXPECT_FALSE(parse_hf_config("{").ok());
}

}  // namespace
}  // namespace kipp
