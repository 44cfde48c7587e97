#include "cli/model_source.h"

#include <filesystem>

#include "core/files.h"
#include "model/registry.h"
#include "pull/pull.h"

namespace kipp::cli {

Expected<train::InitSource> open_model_source(const std::string& what, const std::string& source) {
  std::error_code error;
  if (std::filesystem::exists(source, error)) return train::read_init_source(source, source);
  const RegistryEntry* entry = Registry::builtin().find(source);
  if (entry == nullptr) {
    return make_error(what + " " + source +
                      ": no such file or folder, nor a registry name (kipp registry lists them); give a GGUF, an HF "
                      "checkpoint folder or a name such as Qwen/Qwen3-0.6B");
  }
  KIPP_ASSIGN_OR_RETURN(const std::string dir, default_pull_dir(entry->id, entry->revision));
  if (!file_exists(dir + "/config.json")) {
    return make_error(what + " " + source + ": " + entry->id + " has not been pulled (no " + dir +
                      "/config.json); run `kipp pull " + entry->id + "` first, or give the folder or GGUF it is in");
  }
  return train::read_init_source(source, dir);
}

}  // namespace kipp::cli
