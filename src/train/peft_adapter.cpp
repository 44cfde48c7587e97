#include "train/peft_adapter.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/files.h"
#include "format/safetensors.h"

namespace kipp::train {
namespace {

using nlohmann::json;

// PEFT keys the adapter slot's name ("default") into the module path when the model holds it;
// saved files usually drop it, but not every tool does.
std::string with_adapter_name(const std::string& name) {
  const std::string suffix = ".weight";
  return name.substr(0, name.size() - suffix.size()) + ".default" + suffix;
}

std::string adapter_config_json(const LoraOptions& options, const std::string& base_model) {
  json targets = json::array();
  for (LoraTarget target : kAllLoraTargets) {
    for (LoraTarget chosen : options.targets) {
      if (chosen == target) targets.push_back(std::string(lora_peft_module(target)));
    }
  }
  const json out = {{"peft_type", "LORA"},
                    {"task_type", "CAUSAL_LM"},
                    {"r", options.rank},
                    {"lora_alpha", options.alpha},
                    {"lora_dropout", options.dropout},
                    {"target_modules", targets},
                    {"bias", "none"},
                    {"fan_in_fan_out", false},
                    {"base_model_name_or_path", base_model},
                    {"inference_mode", true},
                    {"use_rslora", false},
                    {"use_dora", false},
                    {"modules_to_save", nullptr},
                    {"layers_to_transform", nullptr},
                    {"rank_pattern", json::object()},
                    {"alpha_pattern", json::object()},
                    {"init_lora_weights", true}};
  return out.dump(2) + "\n";
}

// A field that changes what the adapter means beyond W + (alpha / r) B A must have its plain value.
Status check_plain(const json& root, const std::string& path) {
  struct Plain {
    const char* key;
    json value;  // the one accepted value (null also accepted where PEFT writes it)
    const char* meaning;
  };
  const Plain plain[] = {{"use_rslora", false, "rank-stabilized scaling alpha / sqrt(r)"},
                         {"use_dora", false, "weight-decomposed LoRA (DoRA)"},
                         {"fan_in_fan_out", false, "transposed (Conv1D) weights"},
                         {"bias", "none", "trained biases"},
                         {"modules_to_save", nullptr, "fully trained extra modules"},
                         {"layers_to_transform", nullptr, "adapters on some layers only"},
                         {"rank_pattern", json::object(), "per-module ranks"},
                         {"alpha_pattern", json::object(), "per-module alphas"}};
  for (const Plain& p : plain) {
    const auto it = root.find(p.key);
    if (it == root.end() || it->is_null() || *it == p.value) continue;
    if (p.value.is_null() && it->is_array() && it->empty()) continue;
    return make_error(path + ": '" + p.key + "' is " + it->dump() + " (" + p.meaning +
                      "), which kipp does not support; only " + p.value.dump() + " is");
  }
  return {};
}

Expected<LoraOptions> parse_adapter_config(const std::string& path, std::string& base_model) {
  KIPP_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  const json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return make_error(path + ": not a JSON object");
  const auto type = root.find("peft_type");
  if (type == root.end() || *type != "LORA") {
    return make_error(path + ": 'peft_type' is " + (type == root.end() ? std::string("missing") : type->dump()) +
                      " (expected \"LORA\")");
  }
  LoraOptions options;
  const auto r = root.find("r");
  if (r == root.end() || !r->is_number_unsigned() || r->get<uint64_t>() == 0 || r->get<uint64_t>() > UINT32_MAX) {
    return make_error(path + ": 'r' must be a positive integer, found " +
                      (r == root.end() ? std::string("nothing") : r->dump()));
  }
  options.rank = r->get<uint32_t>();
  const auto alpha = root.find("lora_alpha");
  if (alpha == root.end() || !alpha->is_number() || !(alpha->get<double>() > 0)) {
    return make_error(path + ": 'lora_alpha' must be a positive number, found " +
                      (alpha == root.end() ? std::string("nothing") : alpha->dump()));
  }
  options.alpha = alpha->get<double>();
  if (const auto dropout = root.find("lora_dropout"); dropout != root.end() && !dropout->is_null()) {
    if (!dropout->is_number() || !(dropout->get<double>() >= 0 && dropout->get<double>() < 1)) {
      return make_error(path + ": 'lora_dropout' must be a number in [0, 1), found " + dropout->dump());
    }
    options.dropout = dropout->get<double>();
  }
  const auto modules = root.find("target_modules");
  if (modules == root.end() || !modules->is_array() || modules->empty()) {
    return make_error(path +
                      ": 'target_modules' must be a non-empty list of module names (q_proj ... down_proj), found " +
                      (modules == root.end() ? std::string("nothing") : modules->dump()));
  }
  options.targets.clear();
  for (const json& module : *modules) {
    auto target = module.is_string() ? parse_lora_target(module.get<std::string>())
                                     : Expected<LoraTarget>(make_error(module.dump() + " is not a module name"));
    if (!target) return make_error(path + ": target_modules: " + target.message());
    if (std::find(options.targets.begin(), options.targets.end(), *target) == options.targets.end()) {
      options.targets.push_back(*target);
    }
  }
  KIPP_RETURN_IF_ERROR(check_plain(root, path));
  base_model.clear();
  if (const auto base = root.find("base_model_name_or_path"); base != root.end() && base->is_string()) {
    base_model = base->get<std::string>();
  }
  return options;
}

}  // namespace

Status save_peft_adapter(const std::string& dir, const AdapterLayout& layout, std::span<const float> values,
                         const std::string& base_model) {
  if (values.size() != layout.total()) {
    return make_error(dir + ": " + std::to_string(values.size()) + " adapter values for a layout of " +
                      std::to_string(layout.total()));
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return make_error("cannot create " + dir + ": " + error.message());
  std::vector<SafetensorsWriteTensor> tensors;
  for (const ParamTensor& t : layout.tensors()) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(values.data() + t.offset);
    tensors.push_back({t.name, SafetensorsDtype::F32, t.shape, {bytes, t.count * sizeof(float)}});
  }
  KIPP_RETURN_IF_ERROR(write_safetensors(join_path(dir, kAdapterModelFile), tensors, {{"format", "pt"}}));
  return write_text_file_atomic(join_path(dir, kAdapterConfigFile), adapter_config_json(layout.options(), base_model));
}

Expected<PeftAdapter> load_peft_adapter(const std::string& dir, const ModelConfig& config) {
  PeftAdapter out;
  KIPP_ASSIGN_OR_RETURN(out.options, parse_adapter_config(join_path(dir, kAdapterConfigFile), out.base_model));
  const AdapterLayout layout(config, out.options);
  KIPP_ASSIGN_OR_RETURN(const SafetensorsFile file, SafetensorsFile::open(join_path(dir, kAdapterModelFile)));
  out.values.resize(layout.total());
  std::set<std::string> used;
  for (const ParamTensor& t : layout.tensors()) {
    const SafetensorsTensor* found = file.find(t.name);
    if (!found) found = file.find(with_adapter_name(t.name));
    if (!found) return make_error(file.path() + ": tensor " + t.name + " is missing");
    if (found->shape != t.shape) {
      return make_error(file.path() + ": tensor " + found->name + " has shape " + shape_text(found->shape) +
                        ", but the base's " + std::string(t.name.ends_with(".lora_A.weight") ? "[r, in]" : "[out, r]") +
                        " is " + shape_text(t.shape) + ": the adapter was made for another model");
    }
    KIPP_RETURN_IF_ERROR(with_context(
        safetensors_to_f32(*found, file.data(*found), std::span(out.values).subspan(t.offset, t.count)), file.path()));
    used.insert(found->name);
  }
  for (const SafetensorsTensor& tensor : file.tensors()) {
    if (!used.count(tensor.name)) {
      return make_error(file.path() + ": tensor " + tensor.name + " is not an adapter of this base (layers 0.." +
                        std::to_string(config.num_layers - 1) + ", targets " +
                        std::to_string(out.options.targets.size()) + ")");
    }
  }
  return out;
}

}  // namespace kipp::train
