// The compiled-in registry of pinned Qwen3 dense checkpoints (registry/qwen3_dense.json).
// Fields listed in an entry's `unconfirmed` rest on a single or indirect source; a file
// without a size or sha256 is not checked on that field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/model_config.h"

namespace kipp {

enum class Variant { Base, Instruct, Thinking };
std::string_view variant_name(Variant variant);
std::optional<Variant> parse_variant(std::string_view name);

struct RegistryFile {
  std::string name;
  std::optional<uint64_t> size;
  std::optional<std::string> sha256;
};

struct RegistryEntry {
  std::string id;        // Hub repository, e.g. "Qwen/Qwen3-0.6B"
  std::string revision;  // 40-hex commit
  Variant variant = Variant::Base;
  ModelConfig config;
  std::vector<uint32_t> stop_token_ids;
  bool ships_tied_lm_head = false;  // safetensors carry lm_head.weight although tied
  std::vector<RegistryFile> files;
  std::vector<std::string> unconfirmed;
  std::string notes;

  const RegistryFile* find_file(std::string_view name) const;
  // True when `field` (e.g. "config.head_dim") or one of its parents is marked unconfirmed.
  bool is_unconfirmed(std::string_view field) const;
};

class Registry {
 public:
  static Expected<Registry> parse(std::string_view json_text);
  // The registry compiled into this binary; parsed once.
  static const Registry& builtin();

  const std::vector<RegistryEntry>& entries() const { return entries_; }
  // By repository id ("Qwen/Qwen3-0.6B") or its name alone ("Qwen3-0.6B"), case-insensitive.
  const RegistryEntry* find(std::string_view id) const;

 private:
  std::vector<RegistryEntry> entries_;
};

}  // namespace kipp
