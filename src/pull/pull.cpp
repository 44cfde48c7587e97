#include "pull/pull.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>
#include <type_traits>

#include "core/files.h"
#include "model/model_config.h"
#include "model/registry.h"

namespace kipp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";
constexpr std::array<const char*, 4> kSideFiles = {"config.json", "generation_config.json", "tokenizer.json",
                                                   "tokenizer_config.json"};

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool is_weight_file(const std::string& name) { return name == kIndexName || name.ends_with(".safetensors"); }

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

std::string utc_now_iso() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string scheme_suffix(QuantScheme scheme) {
  switch (scheme) {
    case QuantScheme::BF16: return "";
    case QuantScheme::Q8_0: return "-q8_0";
    case QuantScheme::Affine4: return "-affine4";
  }
  return "";
}

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }

// What to pull: a registry entry (pinned, verified against the registry) or any repository.
struct Target {
  const RegistryEntry* entry = nullptr;
  std::string repository;
  std::string revision;
};

Expected<Target> resolve_target(const PullOptions& options) {
  if (!options.id.empty() && !options.repository.empty()) {
    return make_error("give either a registry ID or --repo/--revision, not both");
  }
  if (options.id.empty() && options.repository.empty()) {
    return make_error(
        "nothing to pull: give a registry ID (`kipp registry` lists them) or --repo OWNER/NAME "
        "--revision REV");
  }
  Target target;
  if (!options.id.empty()) {
    target.entry = Registry::builtin().find(options.id);
    if (target.entry == nullptr) {
      return make_error("'" + options.id + "' is not a registry checkpoint; `kipp registry` lists the ones Kipp " +
                        "pins (any other repository: --repo OWNER/NAME --revision REV, verified against the " +
                        "server only, converted with local provenance)");
    }
    if (!options.revision.empty() && options.revision != target.entry->revision) {
      return make_error(target.entry->id + " is pinned at revision " + target.entry->revision + "; --revision " +
                        options.revision + " cannot be used with a registry ID");
    }
    target.repository = target.entry->id;
    target.revision = target.entry->revision;
    return target;
  }
  KIPP_RETURN_IF_ERROR(check_repository_id(options.repository));
  if (options.revision.empty()) return make_error("--repo " + options.repository + " needs --revision REV");
  KIPP_RETURN_IF_ERROR(check_revision(options.revision));
  target.repository = options.repository;
  target.revision = options.revision;
  // The pinned checkpoint itself, named by repository: hold it to the registry, not less.
  const RegistryEntry* entry = Registry::builtin().find(options.repository);
  if (entry != nullptr && lower(entry->id) == lower(options.repository) && entry->revision == options.revision) {
    target.entry = entry;
    target.repository = entry->id;
  }
  return target;
}

// Sizes and SHA-256 a previous pull of the same repository and revision verified.
std::map<std::string, std::pair<uint64_t, std::string>> read_previous_manifest(const std::string& path,
                                                                               const Target& target) {
  std::map<std::string, std::pair<uint64_t, std::string>> files;
  if (!file_exists(path)) return files;
  auto text = read_text_file(path);
  if (!text.ok()) return files;
  const json manifest = json::parse(*text, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object() || manifest.value("repository", "") != target.repository ||
      manifest.value("revision", "") != target.revision || !manifest.contains("files") ||
      !manifest["files"].is_array()) {
    return files;
  }
  for (const json& file : manifest["files"]) {
    if (!file.is_object() || !file.contains("name") || !file["name"].is_string() || !file.contains("size") ||
        !file["size"].is_number_unsigned() || !file.contains("sha256") || !file["sha256"].is_string()) {
      continue;
    }
    files[file["name"].get<std::string>()] = {file["size"].get<uint64_t>(), file["sha256"].get<std::string>()};
  }
  return files;
}

Expected<std::vector<std::string>> shards_from_index(const std::string& path) {
  KIPP_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  const json index = json::parse(text, nullptr, false);
  if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return make_error(path + ": expected a JSON object with an object field 'weight_map'");
  }
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) {
      return make_error(path + ": weight_map['" + tensor + "'] is not a file name: " + shard.dump());
    }
    const std::string name = shard.get<std::string>();
    auto valid = check_shard_name(name);
    if (!valid.ok()) return make_error(path + ": weight_map['" + tensor + "']: " + valid.message());
    shards.insert(name);
  }
  if (shards.empty()) return make_error(path + ": weight_map lists no shards");
  return std::vector<std::string>(shards.begin(), shards.end());
}

std::string describe_differences(const ModelConfig& found, const ModelConfig& pinned) {
  std::string out;
  const auto text = [](auto value) {
    if constexpr (std::is_floating_point_v<decltype(value)>) {
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%g", value);
      return std::string(buffer);
    } else {
      return std::to_string(value);
    }
  };
  visit_config_members([&](const ModelConfigField& field, auto member) {
    if (found.*member == pinned.*member) return;
    if (!out.empty()) out += ", ";
    // A flag reads as 0 or 1.
    const auto value = [member](const ModelConfig& c) {
      if constexpr (std::is_same_v<std::decay_t<decltype(c.*member)>, bool>)
        return int{c.*member};
      else
        return c.*member;
    };
    out += std::string(field.hf_key) + " " + text(value(found)) + " (expected " + text(value(pinned)) + ")";
  });
  return out;
}

class Puller {
 public:
  Puller(const PullOptions& options, Target target, std::string dir, std::string base_url)
      : options_(options),
        target_(std::move(target)),
        dir_(std::move(dir)),
        base_url_(std::move(base_url)),
        downloader_(HttpOptions{.bearer_token = options.hf_token,
                                .stall_timeout_s = options.stall_timeout_s,
                                .max_attempts = options.max_attempts,
                                .retry_delay_s = options.retry_delay_s}) {
    previous_ = read_previous_manifest(join_path(dir_, kPullManifestName), target_);
  }

  Expected<PullReport> run() {
    report_.registry = target_.entry != nullptr;
    report_.repository = target_.repository;
    report_.revision = target_.revision;
    report_.base_url = base_url_;
    report_.dir = dir_;
    log(std::string(report_.registry ? "pulling registry checkpoint " : "pulling repository (not a registry pin) ") +
        target_.repository + "@" + target_.revision + " from " + base_url_ + " into " + dir_);
    for (const char* name : kSideFiles) {
      const bool required = std::string(name) == "config.json" || std::string(name) == "tokenizer.json" ||
                            (target_.entry != nullptr && target_.entry->find_file(name) != nullptr);
      KIPP_RETURN_IF_ERROR(fetch(name, required));
    }
    if (target_.entry != nullptr) KIPP_RETURN_IF_ERROR(check_registry_config());
    KIPP_RETURN_IF_ERROR(fetch_weights());
    KIPP_RETURN_IF_ERROR(write_manifest());
    if (options_.convert) KIPP_RETURN_IF_ERROR(convert());
    return report_;
  }

 private:
  void log(const std::string& line) const {
    if (options_.log) options_.log(line);
  }

  std::string url(const std::string& name) const {
    return hub_file_url(base_url_, target_.repository, target_.revision, name);
  }

  std::string registry_source() const {
    return "registry " + target_.repository + "@" + target_.revision.substr(0, 12);
  }

  // Downloads `name` unless a verified copy is present; a missing optional file is skipped.
  // Returns whether the file is now present.
  Expected<bool> fetch(const std::string& name, bool required) {
    DownloadRequest request;
    request.url = url(name);
    request.destination = join_path(dir_, name);
    request.name = name;
    request.expected_source = registry_source();
    if (const RegistryFile* pinned = target_.entry ? target_.entry->find_file(name) : nullptr) {
      request.expected_size = pinned->size;
      request.expected_sha256 = pinned->sha256;
    }
    if (file_exists(request.destination)) {
      KIPP_ASSIGN_OR_RETURN(const bool present, check_present(request));
      if (present) return true;
    }
    KIPP_ASSIGN_OR_RETURN(const DownloadResult result, downloader_.download(request, options_.progress));
    report_.bytes_transferred += result.bytes_transferred;
    if (!result.found) {
      if (required) return make_error(name + ": not found on the server (HTTP 404 for " + request.url + ")");
      log(name + ": not on the server (404), skipped");
      return false;
    }
    const std::string size_source =
        result.size_checked_against.empty() ? std::string("nothing") : result.size_checked_against;
    std::string how = result.sha256_checked_against.empty()
                          ? "size checked against " + size_source + ", no SHA-256 offered to check"
                          : "SHA-256 verified against " + result.sha256_checked_against;
    if (result.attempts > 1) how += ", " + std::to_string(result.attempts) + " attempts";
    log(name + ": " + std::to_string(result.size) + " bytes, " + how);
    report_.files.push_back({name, result.size, result.sha256, true, result.sha256_checked_against});
    return true;
  }

  // A file under its final name was verified when it was written; it is reused when it still
  // matches the best known SHA-256 (registry, then the previous manifest, then the server).
  Expected<bool> check_present(const DownloadRequest& request) {
    std::optional<uint64_t> size = request.expected_size;
    std::optional<std::string> sha = request.expected_sha256;
    std::string source = request.expected_source;
    if (!sha) {
      if (const auto known = previous_.find(request.name); known != previous_.end()) {
        if (!size) size = known->second.first;
        sha = known->second.second;
        source = kPullManifestName;
      }
    }
    if (!sha) {
      auto remote = downloader_.probe(request.url);
      if (remote.ok() && remote->found && remote->sha256) {
        if (!size) size = remote->size;
        sha = remote->sha256;
        source = "server ETag";
      }
    }
    if (!sha) return false;  // nothing to compare with: fetch it again
    KIPP_ASSIGN_OR_RETURN(const uint64_t found_size, file_size(request.destination));
    if (size && found_size != *size) {
      log(request.name + ": present but " + std::to_string(found_size) + " bytes (" + source + ": " +
          std::to_string(*size) + "); downloading again");
      return false;
    }
    KIPP_ASSIGN_OR_RETURN(const std::string found_sha, sha256_file_hex(request.destination));
    if (lower(found_sha) != lower(*sha)) {
      log(request.name + ": present but its SHA-256 differs from the " + source + "; downloading again");
      return false;
    }
    log(request.name + ": already present, SHA-256 verified against " + source);
    report_.files.push_back({request.name, found_size, found_sha, false, source});
    return true;
  }

  // The converter checks this too; checking before the weights saves fetching gigabytes of a
  // checkpoint that cannot get the registry stamp.
  Status check_registry_config() const {
    const std::string path = join_path(dir_, "config.json");
    KIPP_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
    auto config = parse_hf_config(text);
    if (!config.ok()) return make_error(path + ": " + config.message());
    const std::string differences = describe_differences(*config, target_.entry->config);
    if (!differences.empty()) {
      return make_error("config.json does not match the " + registry_source() + ": " + differences);
    }
    return ok_status();
  }

  Status fetch_weights() {
    std::vector<std::string> pinned;
    if (target_.entry != nullptr) {
      for (const auto& file : target_.entry->files) {
        if (is_weight_file(file.name)) pinned.push_back(file.name);
      }
    }
    const bool pinned_index = std::find(pinned.begin(), pinned.end(), kIndexName) != pinned.end();
    if (!pinned.empty() && !pinned_index) {
      for (const auto& name : pinned) KIPP_RETURN_IF_ERROR(fetch(name, true));
      return ok_status();
    }
    // Sharded (or, with no registry list, discovered): the index names the shards.
    KIPP_ASSIGN_OR_RETURN(const bool has_index, fetch(kIndexName, pinned_index));
    if (!has_index) {
      KIPP_ASSIGN_OR_RETURN(const bool has_single, fetch(kSingleName, false));
      if (!has_single) {
        return make_error(target_.repository + "@" + target_.revision + " has neither " + kIndexName + " nor " +
                          kSingleName + " (404 for both at " + url("") + ")");
      }
      return ok_status();
    }
    KIPP_ASSIGN_OR_RETURN(const auto shards, shards_from_index(join_path(dir_, kIndexName)));
    if (pinned_index) {
      std::vector<std::string> pinned_shards;
      for (const auto& name : pinned) {
        if (name != kIndexName) pinned_shards.push_back(name);
      }
      std::sort(pinned_shards.begin(), pinned_shards.end());
      if (pinned_shards != shards) {
        return make_error(std::string(kIndexName) + " names " + std::to_string(shards.size()) +
                          " shards that differ from the " + std::to_string(pinned_shards.size()) + " the " +
                          registry_source() + " lists");
      }
    }
    for (const auto& shard : shards) KIPP_RETURN_IF_ERROR(fetch(shard, true));
    return ok_status();
  }

  Status write_manifest() {
    json files = json::array();
    for (const auto& file : report_.files) {
      files.push_back({{"name", file.name}, {"size", file.size}, {"sha256", file.sha256}});
    }
    const json manifest = {{"registry", report_.registry},
                           {"repository", report_.repository},
                           {"revision", report_.revision},
                           {"base_url", report_.base_url},
                           {"files", files},
                           {"completed_at", utc_now_iso()}};
    report_.manifest_path = join_path(dir_, kPullManifestName);
    KIPP_RETURN_IF_ERROR(write_text_file_atomic(report_.manifest_path, manifest.dump(2) + "\n"));
    log("wrote " + report_.manifest_path);
    return ok_status();
  }

  Status convert() {
    ConvertOptions convert_options;
    convert_options.input_dir = dir_;
    const std::string name = target_.repository.substr(target_.repository.find('/') + 1);
    convert_options.output_path = options_.output_path.empty()
                                      ? join_path(dir_, name + scheme_suffix(options_.scheme) + ".gguf")
                                      : options_.output_path;
    convert_options.scheme = options_.scheme;
    convert_options.name = target_.repository;
    // The registry stamp comes from kipp-pull.json; the converter verifies the files against
    // the registry once more before it grants it.
    convert_options.progress = [this](const std::string& line) { log("convert: " + line); };
    auto converted = convert_checkpoint(convert_options);
    if (!converted.ok()) return make_error("converting " + dir_ + ": " + converted.message());
    report_.output_path = convert_options.output_path;
    report_.converted = std::move(converted).value();
    return ok_status();
  }

  const PullOptions& options_;
  Target target_;
  std::string dir_;
  std::string base_url_;
  HttpDownloader downloader_;
  std::map<std::string, std::pair<uint64_t, std::string>> previous_;
  PullReport report_;
};

}  // namespace

std::string resolve_hub_base_url(const std::string& flag) {
  std::string url = !flag.empty() ? flag : env_or_empty("KIPP_HUB_BASE_URL");
  if (url.empty()) url = kDefaultHubBaseUrl;
  while (url.size() > 1 && url.back() == '/') url.pop_back();
  return url;
}

Expected<std::string> default_pull_dir(const std::string& repository, const std::string& revision) {
  std::string root = env_or_empty("KIPP_MODELS_DIR");
  if (root.empty()) {
    const std::string home = env_or_empty("HOME");
    if (home.empty()) return make_error("neither KIPP_MODELS_DIR nor HOME is set; pass --dir");
    root = join_path(home, ".cache/kipp/models");
  }
  std::string folder = repository;
  const size_t slash = folder.find('/');
  if (slash != std::string::npos) folder.replace(slash, 1, "--");
  return join_path(root, folder + "@" + revision.substr(0, 12));
}

std::string hub_file_url(const std::string& base_url, const std::string& repository, const std::string& revision,
                         const std::string& file) {
  const size_t slash = repository.find('/');
  std::string url = base_url + "/" + url_encode_segment(repository.substr(0, slash));
  if (slash != std::string::npos) url += "/" + url_encode_segment(repository.substr(slash + 1));
  return url + "/resolve/" + url_encode_segment(revision) + "/" + url_encode_segment(file);
}

Status check_repository_id(const std::string& repository) {
  const size_t slash = repository.find('/');
  const auto valid_part = [](std::string_view part) {
    return !part.empty() && part != "." && part != ".." && std::all_of(part.begin(), part.end(), is_name_char);
  };
  if (slash == std::string::npos || !valid_part(std::string_view(repository).substr(0, slash)) ||
      !valid_part(std::string_view(repository).substr(slash + 1))) {
    return make_error("repository '" + repository + "' is not OWNER/NAME (letters, digits, '-', '_', '.')");
  }
  return ok_status();
}

Status check_revision(const std::string& revision) {
  if (revision.empty() || revision == "." || revision == ".." ||
      !std::all_of(revision.begin(), revision.end(), is_name_char)) {
    return make_error("revision '" + revision + "' is not a commit hash, tag or branch name without '/'");
  }
  return ok_status();
}

Status check_shard_name(const std::string& name) {
  const bool plain = !name.empty() && name.size() < 256 && name.front() != '.' &&
                     name.find("..") == std::string::npos && name.ends_with(".safetensors") &&
                     std::all_of(name.begin(), name.end(), is_name_char);
  if (!plain) return make_error("shard '" + name + "' is not a plain *.safetensors file name");
  return ok_status();
}

Expected<PullReport> pull_checkpoint(const PullOptions& options) {
  KIPP_ASSIGN_OR_RETURN(const Target target, resolve_target(options));
  const std::string base_url = resolve_hub_base_url(options.base_url);
  if (!base_url.starts_with("http://") && !base_url.starts_with("https://")) {
    return make_error("hub base URL '" + base_url + "' is not an http:// or https:// URL");
  }
  std::string dir = options.dir;
  if (dir.empty()) {
    KIPP_ASSIGN_OR_RETURN(dir, default_pull_dir(target.repository, target.revision));
  }
  std::error_code error;
  fs::create_directories(dir, error);
  if (error || !fs::is_directory(dir)) {
    return make_error("cannot create " + dir + ": " + (error ? error.message() : std::string("not a directory")));
  }
  // Two pulls into one folder would append to the same .part files.
  KIPP_ASSIGN_OR_RETURN(const ExclusiveLock lock,
                        ExclusiveLock::acquire(join_path(dir, ".kipp-pull.lock"), "kipp pull is writing " + dir));
  Puller puller(options, target, dir, base_url);
  return puller.run();
}

}  // namespace kipp
