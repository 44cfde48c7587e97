#include "model/registry.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <type_traits>

namespace kipp {

std::string_view embedded_registry_json();  // generated from registry/qwen3_dense.json

namespace {

using nlohmann::json;

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

Expected<RegistryEntry> parse_entry(const json& item) {
  RegistryEntry entry;
  entry.id = item.at("id").get<std::string>();
  entry.revision = item.at("revision").get<std::string>();
  const auto variant = parse_variant(item.at("variant").get<std::string>());
  if (!variant) return make_error("registry entry " + entry.id + ": unknown variant " + item.at("variant").dump());
  entry.variant = *variant;
  const json& config = item.at("config");
  ModelConfig& c = entry.config;
  visit_config_fields(c, [&config](const ModelConfigField& field, auto& value) {
    value = config.at(std::string(field.hf_key)).get<std::decay_t<decltype(value)>>();
  });
  KIPP_RETURN_IF_ERROR(with_context(c.validate(), "registry entry " + entry.id));
  entry.stop_token_ids = item.at("stop_token_ids").get<std::vector<uint32_t>>();
  entry.ships_tied_lm_head = item.at("ships_tied_lm_head").get<bool>();
  for (const json& file : item.at("files")) {
    RegistryFile f;
    f.name = file.at("name").get<std::string>();
    if (!file.at("size").is_null()) f.size = file.at("size").get<uint64_t>();
    if (!file.at("sha256").is_null()) f.sha256 = file.at("sha256").get<std::string>();
    entry.files.push_back(std::move(f));
  }
  entry.unconfirmed = item.at("unconfirmed").get<std::vector<std::string>>();
  entry.notes = item.value("notes", std::string());
  if (entry.revision.size() != 40) return make_error("registry entry " + entry.id + ": revision is not 40 hex digits");
  return entry;
}

}  // namespace

std::string_view variant_name(Variant variant) {
  switch (variant) {
    case Variant::Base: return "base";
    case Variant::Instruct: return "instruct";
    case Variant::Thinking: return "thinking";
  }
  return "unknown";
}

std::optional<Variant> parse_variant(std::string_view name) {
  if (name == "base") return Variant::Base;
  if (name == "instruct") return Variant::Instruct;
  if (name == "thinking") return Variant::Thinking;
  return std::nullopt;
}

const RegistryFile* RegistryEntry::find_file(std::string_view name) const {
  for (const auto& file : files) {
    if (file.name == name) return &file;
  }
  return nullptr;
}

bool RegistryEntry::is_unconfirmed(std::string_view field) const {
  return std::any_of(unconfirmed.begin(), unconfirmed.end(), [&](const std::string& mark) {
    return field == mark ||
           (field.size() > mark.size() && field.substr(0, mark.size()) == mark && field[mark.size()] == '.');
  });
}

Expected<Registry> Registry::parse(std::string_view json_text) {
  const json document = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded() || !document.is_object()) return make_error("registry: not a JSON object");
  Registry registry;
  try {
    for (const json& item : document.at("checkpoints")) {
      KIPP_ASSIGN_OR_RETURN(RegistryEntry entry, parse_entry(item));
      if (registry.find(entry.id) != nullptr) return make_error("registry: duplicate entry " + entry.id);
      registry.entries_.push_back(std::move(entry));
    }
  } catch (const json::exception& error) {
    return make_error(std::string("registry: ") + error.what());
  }
  return registry;
}

const Registry& Registry::builtin() {
  static const Registry registry = [] {
    auto parsed = Registry::parse(embedded_registry_json());
    if (!parsed.ok()) {
      // The embedded file is checked by the test suite; reaching this is a build defect.
      std::fprintf(stderr, "kipp: the compiled-in registry is invalid: %s\n", parsed.message().c_str());
      std::abort();
    }
    return std::move(parsed).value();
  }();
  return registry;
}

const RegistryEntry* Registry::find(std::string_view id) const {
  for (const auto& entry : entries_) {
    const std::string_view name = std::string_view(entry.id).substr(entry.id.find('/') + 1);
    if (equal_ignoring_case(entry.id, id) || equal_ignoring_case(name, id)) return &entry;
  }
  return nullptr;
}

}  // namespace kipp
