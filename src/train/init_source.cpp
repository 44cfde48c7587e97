#include "train/init_source.h"

#include <charconv>
#include <type_traits>

#include "core/files.h"
#include "model/model.h"

namespace kipp::train {
namespace {

// GGUF keeps rope_theta and the norm epsilon as float32; the shortest decimal that reads back
// as that float is the value the model was configured with (1e-06, not 9.99999997e-07), so a
// config that writes it agrees with the GGUF as it does with the HF folder.
double as_configured(double value) {
  char text[32];
  const auto written = std::to_chars(text, text + sizeof text, static_cast<float>(value));
  double out = value;
  std::from_chars(text, written.ptr, out);
  return out;
}

}  // namespace

Expected<InitSource> read_init_source(const std::string& name, const std::string& path) {
  InitSource source{name, path, {}, {}};
  if (path.ends_with(".gguf")) {
    KIPP_ASSIGN_OR_RETURN(const Model model, Model::open(path));
    source.config = model.config();
    visit_config_fields(source.config, [](const ModelConfigField&, auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, double>) value = as_configured(value);
    });
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
