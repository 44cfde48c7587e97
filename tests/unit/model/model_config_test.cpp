// The model configuration's field table (visit_config_members) and what walks it: config.json
// reading and writing, GGUF metadata, equality, validation and the mismatch messages.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <type_traits>

#include "model/gguf_schema.h"
#include "model/model.h"
#include "model/registry.h"
#include "train/checkpoint.h"
#include "train/parameters.h"
#include "train/train_config.h"
#include "unit/helpers/gguf_blueprint.h"

namespace kipp {
namespace {

using testing::micro_config;

// Another value of a field that keeps micro_config() valid: flags flip, reals halve, counts
// double, token ids move to the next id.
template <class T>
T other_value(const ModelConfigField& field, T value) {
  if constexpr (std::is_same_v<T, bool>) {
    return !value;
  } else if constexpr (std::is_same_v<T, double>) {
    return value / 2;
  } else {
    return field.token_id ? (value + 1) % micro_config().vocab_size : value * 2;
  }
}

TEST(ModelConfigFields, KeysAreDistinctAndHyperParametersHaveOnePlaceEach) {
  std::set<std::string_view> hf_keys, gguf_keys, yaml_keys;
  std::set<int> orders;
  size_t fields = 0, hyper_parameters = 0;
  visit_config_members([&](const ModelConfigField& field, auto) {
    ++fields;
    EXPECT_FALSE(field.hf_key.empty());
    EXPECT_FALSE(field.gguf_key.empty()) << field.hf_key;
    EXPECT_TRUE(hf_keys.insert(field.hf_key).second) << field.hf_key;
    EXPECT_TRUE(gguf_keys.insert(field.gguf_key).second) << field.gguf_key;
    if (!field.gguf_twin.empty()) {
      EXPECT_TRUE(gguf_keys.insert(field.gguf_twin).second) << field.gguf_twin;
    }
    if (field.yaml_key != nullptr) {
      EXPECT_TRUE(yaml_keys.insert(field.yaml_key).second) << field.yaml_key;
    }
    if (field.gguf_home == GgufHome::HyperParameter) {
      ++hyper_parameters;
      EXPECT_TRUE(orders.insert(field.gguf_order).second) << field.hf_key;
    }
  });
  EXPECT_EQ(hf_keys.size(), fields);
  // The hyper-parameter positions are 0..n-1: each has one place in llama.cpp's order.
  ASSERT_FALSE(orders.empty());
  EXPECT_EQ(*orders.begin(), 0);
  EXPECT_EQ(*orders.rbegin(), static_cast<int>(hyper_parameters) - 1);
}

TEST(ModelConfigFields, EqualityAndHfRoundTripCoverEveryField) {
  std::vector<ModelConfig> configs = {micro_config()};
  for (const auto& entry : Registry::builtin().entries()) configs.push_back(entry.config);
  for (const ModelConfig& config : configs) {
    auto parsed = parse_hf_config(train::hf_config_json(config));
    ASSERT_TRUE(parsed.ok()) << parsed.message();
    EXPECT_TRUE(*parsed == config);
  }
  // Each field alone changed: unequal, and the config.json written and read again keeps it.
  visit_config_members([&](const ModelConfigField& field, auto member) {
    ModelConfig changed = micro_config();
    changed.*member = other_value(field, changed.*member);
    EXPECT_FALSE(changed == micro_config()) << field.hf_key;
    auto parsed = parse_hf_config(train::hf_config_json(changed));
    ASSERT_TRUE(parsed.ok()) << field.hf_key << ": " << parsed.message();
    EXPECT_TRUE(*parsed == changed) << field.hf_key;
  });
}

TEST(ModelConfigFields, AMissingOrMistypedHfKeyIsNamed) {
  const nlohmann::json good = nlohmann::json::parse(train::hf_config_json(micro_config()));
  visit_config_members([&](const ModelConfigField& field, auto) {
    const std::string key(field.hf_key);
    nlohmann::json missing = good;
    missing.erase(key);
    auto parsed = parse_hf_config(missing.dump());
    ASSERT_FALSE(parsed.ok()) << key;
    EXPECT_NE(parsed.message().find("'" + key + "'"), std::string::npos) << parsed.message();
    nlohmann::json mistyped = good;
    mistyped[key] = "text";
    parsed = parse_hf_config(mistyped.dump());
    ASSERT_FALSE(parsed.ok()) << key;
    EXPECT_NE(parsed.message().find("'" + key + "'"), std::string::npos) << parsed.message();
  });
}

TEST(ModelConfigFields, ValidationNamesTheFieldThatBreaksItsRule) {
  visit_config_members([&](const ModelConfigField& field, auto member) {
    ModelConfig broken = micro_config();
    using T = std::decay_t<decltype(broken.*member)>;
    if constexpr (std::is_same_v<T, bool>) {
      return;  // both values are valid
    } else if constexpr (std::is_same_v<T, double>) {
      broken.*member = -1;
    } else {
      broken.*member = field.token_id ? broken.vocab_size : (field.multiple > 1 ? field.multiple + 1 : 0);
    }
    const Status status = broken.validate();
    ASSERT_FALSE(status.ok()) << field.hf_key;
    const std::string name = field.token_id ? "bos/eos" : std::string(field.hf_key);
    EXPECT_NE(status.message().find(name), std::string::npos) << status.message();
  });
}

TEST(ModelConfigFields, GgufMetadataRoundTripsTheHyperParameters) {
  for (const auto& entry : Registry::builtin().entries()) {
    GgufWriter writer;
    add_model_metadata(writer, entry.config, entry.id, QuantScheme::BF16);
    auto bytes = writer.to_bytes({});
    ASSERT_TRUE(bytes.ok()) << bytes.message();
    auto file = GgufFile::parse(*bytes);
    ASSERT_TRUE(file.ok()) << file.message();
    auto read = read_model_metadata(*file);
    ASSERT_TRUE(read.ok()) << read.message();
    const ModelConfig stored = as_stored_in_gguf(entry.config);
    visit_config_members([&](const ModelConfigField& field, auto member) {
      if (field.gguf_home == GgufHome::HyperParameter) {
        EXPECT_EQ((*read).*member, stored.*member) << field.hf_key;
      }
      const GgufValue* value = file->find(field.gguf_key);
      EXPECT_EQ(value != nullptr, field.gguf_home == GgufHome::HyperParameter) << field.gguf_key;
    });
  }
}

TEST(ModelConfigFields, TwinKeysMustAgree) {
  GgufWriter writer;
  add_model_metadata(writer, micro_config(), "micro", QuantScheme::BF16);
  const std::vector<GgufMetadataEntry> metadata = writer.metadata();
  visit_config_members([&](const ModelConfigField& field, auto) {
    if (field.gguf_twin.empty()) return;
    GgufWriter changed;
    for (const auto& entry : metadata) {
      changed.add_metadata(entry.key, entry.key == field.gguf_twin
                                          ? GgufValue::u32(static_cast<uint32_t>(*entry.value.as_uint() + 2))
                                          : entry.value);
    }
    auto bytes = changed.to_bytes({});
    ASSERT_TRUE(bytes.ok());
    auto file = GgufFile::parse(*bytes);
    ASSERT_TRUE(file.ok());
    auto read = read_model_metadata(*file);
    ASSERT_FALSE(read.ok()) << field.gguf_twin;
    EXPECT_NE(read.message().find(std::string(field.gguf_twin)), std::string::npos) << read.message();
    EXPECT_NE(read.message().find(std::string(field.gguf_key)), std::string::npos) << read.message();
  });
}

TEST(ModelConfigFields, ShapeMismatchNamesKeyFoundAndExpected) {
  visit_config_members([&](const ModelConfigField& field, auto member) {
    if constexpr (std::is_same_v<std::decay_t<decltype(micro_config().*member)>, uint32_t>) {
      if (!field.shapes_tensors) return;
      const ModelConfig want = micro_config();
      ModelConfig got = want;
      got.*member = other_value(field, got.*member);
      const Status status = train::check_model_dimensions(want, got, "source", true);
      ASSERT_FALSE(status.ok()) << field.hf_key;
      const std::string expected = std::string(field.hf_key) + " " + std::to_string(got.*member) + " (expected " +
                                   std::to_string(want.*member) + ")";
      EXPECT_NE(status.message().find(expected), std::string::npos) << status.message();
    }
  });
}

TEST(ModelConfigFields, TrainingConfigWritesEveryModelKey) {
  auto defaults = train::parse_train_config("", {"tokenizer=/data/tokenizer.json", "data.train=[/data/a.txt]"}, "");
  ASSERT_TRUE(defaults.ok()) << defaults.message();
  const YAML::Node yaml = YAML::Load(train::to_yaml(*defaults));
  visit_config_members([&](const ModelConfigField& field, auto) {
    if (field.yaml_key == nullptr) return;
    const std::string key(field.yaml_key);
    ASSERT_EQ(key.rfind("model.", 0), 0u) << key;
    EXPECT_TRUE(yaml["model"][key.substr(6)].IsDefined()) << key;
  });
}

}  // namespace
}  // namespace kipp
