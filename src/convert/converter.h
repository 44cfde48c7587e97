// `kipp convert`: a Hugging Face Qwen3 checkpoint folder -> one Kipp GGUF file.
// Streams tensor by tensor from the mmapped safetensors; the file appears atomically.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/status.h"
#include "model/gguf_schema.h"
#include "model/model_config.h"

namespace kipp {

// Written by `kipp pull` next to the downloaded files; the converter reads the registry
// stamp (repository + revision) from it when none is given explicitly.
inline constexpr const char* kPullManifestName = "kipp-pull.json";

struct ConvertOptions {
  std::string input_dir;
  std::string output_path;
  QuantScheme scheme = QuantScheme::BF16;
  // Registry provenance: both given (or read from kipp-pull.json), and they must name a
  // registry entry whose recorded file sizes and SHA-256 the input files match.
  std::optional<std::string> repository;
  std::optional<std::string> revision;
  // Local provenance only; default: instruct when tokenizer_config.json has a chat template.
  std::optional<Variant> variant;
  std::string name;  // general.name; default: the repository or the folder name
  // Local provenance only: recorded as kipp.chat_format (the CLI checks the name against
  // chat/chat_template.h's formats); the variant then defaults to instruct.
  std::optional<std::string> chat_format;
  std::function<void(const std::string&)> progress;  // one line per step, may be empty
};

struct ConvertReport {
  ModelConfig config;
  Provenance provenance;
  uint64_t tensor_count = 0;
  uint64_t output_bytes = 0;
  std::string notes;  // e.g. what happened to a shipped tied lm_head
};

Expected<ConvertReport> convert_checkpoint(const ConvertOptions& options);

}  // namespace kipp
