// `kipp pull`: download a checkpoint from the Hugging Face Hub (or a server with the same URL
// layout), verify every file, record what was verified in kipp-pull.json, then convert it.
//
// A registry pull verifies each file against the sizes and SHA-256 the registry pins (and the
// server's SHA-256 ETags where the registry has none) and yields a registry-stamped GGUF.
// A pull of any other repository (`--repo OWNER/NAME --revision REV`) can only check what the
// server itself claims, so its GGUF gets local provenance: random or foreign weights can
// never pass as a pinned checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "convert/converter.h"
#include "core/status.h"
#include "model/gguf_schema.h"
#include "pull/downloader.h"

namespace kipp {

inline constexpr const char* kDefaultHubBaseUrl = "https://huggingface.co";

struct PullOptions {
  // Either a registry id or name ("Qwen/Qwen3-0.6B", "qwen3-0.6b") ...
  std::string id;
  // ... or any repository at a revision, verified against the server only.
  std::string repository;
  std::string revision;

  std::string dir;       // empty: default_pull_dir(repository, revision)
  std::string base_url;  // empty: resolve_hub_base_url("")
  std::string hf_token;  // sent as a bearer token when not empty

  bool convert = true;
  std::string output_path;  // empty: <dir>/<name>.gguf (<name>-<scheme>.gguf when quantized)
  QuantScheme scheme = QuantScheme::BF16;

  int max_attempts = 3;        // per file
  double retry_delay_s = 1.0;  // before the second attempt; grows linearly
  long stall_timeout_s = 60;

  std::function<void(const std::string&)> log;  // one line per step, may be empty
  ProgressCallback progress;                    // byte progress of each transfer, may be empty
};

struct PulledFile {
  std::string name;
  uint64_t size = 0;
  std::string sha256;
  bool downloaded = false;             // false: already present and verified
  std::string sha256_checked_against;  // "registry", "server ETag", "kipp-pull.json" or empty
};

struct PullReport {
  bool registry = false;
  std::string repository;
  std::string revision;
  std::string base_url;
  std::string dir;
  std::string manifest_path;
  std::vector<PulledFile> files;
  uint64_t bytes_transferred = 0;
  std::string output_path;  // empty when not converted
  std::optional<ConvertReport> converted;
};

Expected<PullReport> pull_checkpoint(const PullOptions& options);

// `flag` when given, else $KIPP_HUB_BASE_URL, else https://huggingface.co; no trailing '/'.
std::string resolve_hub_base_url(const std::string& flag);
// ${KIPP_MODELS_DIR:-$HOME/.cache/kipp/models}/<owner>--<name>@<revision, first 12 characters>
Expected<std::string> default_pull_dir(const std::string& repository, const std::string& revision);
// {base}/{repository}/resolve/{revision}/{file}
std::string hub_file_url(const std::string& base_url, const std::string& repository, const std::string& revision,
                         const std::string& file);

// "OWNER/NAME" with each part of letters, digits, '-', '_' and '.', and neither "." nor "..".
Status check_repository_id(const std::string& repository);
// A commit hash, tag or branch without '/' (the revision becomes a URL segment and a folder name).
Status check_revision(const std::string& revision);
// A shard name taken from model.safetensors.index.json: a plain "*.safetensors" file name.
Status check_shard_name(const std::string& name);

}  // namespace kipp
