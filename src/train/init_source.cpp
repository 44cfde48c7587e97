#include "train/init_source.h"

#include "core/files.h"
#include "model/model.h"

namespace kipp::train {

Expected<InitSource> read_init_source(const std::string& name, const std::string& path) {
  InitSource source{name, path, {}, {}};
  if (path.ends_with(".gguf")) {
    KIPP_ASSIGN_OR_RETURN(const Model model, Model::open(path));
    source.config = model.config();
    return source;
  }
  const std::string config_path = path + "/config.json";
  if (!file_exists(config_path)) return make_error(path + ": not a GGUF file nor a checkpoint folder with config.json");
  KIPP_ASSIGN_OR_RETURN(const std::string text, read_text_file(config_path));
  KIPP_ASSIGN_OR_RETURN(source.config, with_context(parse_hf_config(text), config_path));
  if (file_exists(path + "/tokenizer.json")) source.tokenizer = path + "/tokenizer.json";
  return source;
}

}  // namespace kipp::train
