#include "train/lora_merge.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "core/files.h"
#include "core/half.h"
#include "format/safetensors.h"
#include "train/checkpoint.h"
#include "train/parameters.h"

namespace kipp::train {
namespace {

// What a tokenizer folder may hold besides tokenizer.json; each is copied when present.
constexpr const char* kTokenizerFiles[] = {
    "tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json", "vocab.json",
    "merges.txt"};

void tell(const MergeOptions& options, const std::string& line) {
  if (options.on_progress) options.on_progress(line);
}

bool is_gguf(const InitSource& base) { return base.path.ends_with(".gguf"); }

// The base folder's own dtype (its first projection's), so a BF16 checkpoint stays BF16 and an
// F32 one keeps full precision; a GGUF's quantized tensors widen to BF16.
Expected<SafetensorsDtype> output_dtype(const InitSource& base) {
  if (is_gguf(base)) return SafetensorsDtype::BF16;
  KIPP_ASSIGN_OR_RETURN(const SafetensorsCheckpoint checkpoint, SafetensorsCheckpoint::open_dir(base.path));
  const std::string name = "model.layers.0.self_attn.q_proj.weight";
  const SafetensorsTensor* tensor = checkpoint.find(name);
  if (!tensor) return make_error(base.path + ": tensor " + name + " is missing");
  switch (tensor->dtype) {
    case SafetensorsDtype::BF16:
    case SafetensorsDtype::F16:
    case SafetensorsDtype::F32: return tensor->dtype;
    default:
      return make_error(base.path + ": tensor " + name + " has dtype " +
                        std::string(safetensors_dtype_name(tensor->dtype)) + " (expected F32, BF16 or F16)");
  }
}

// W += scale * B A for one projection: W [out, in], B [out, r], A [r, in]; the sum of the r
// products and the addition in double, one rounding to float.
void add_low_rank(float* w, const float* a, const float* b, uint32_t out, uint32_t in, uint32_t rank, double scale) {
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < int64_t(out); ++o) {
    std::vector<double> row(in, 0.0);
    for (uint32_t k = 0; k < rank; ++k) {
      const double bk = b[size_t(o) * rank + k];
      const float* ak = a + size_t(k) * in;
      for (uint32_t i = 0; i < in; ++i) row[i] += bk * double(ak[i]);
    }
    float* wo = w + size_t(o) * in;
    for (uint32_t i = 0; i < in; ++i) wo[i] = float(double(wo[i]) + scale * row[i]);
  }
}

// The first of the candidate folders that holds tokenizer.json.
Expected<std::string> tokenizer_folder(const InitSource& base, const std::string& adapter_dir,
                                       const MergeOptions& options) {
  std::vector<std::string> candidates;
  if (!is_gguf(base)) candidates.push_back(base.path);
  candidates.push_back(adapter_dir);
  if (!options.tokenizer_dir.empty()) candidates.push_back(options.tokenizer_dir);
  std::string looked;
  for (const std::string& dir : candidates) {
    if (file_exists(join_path(dir, "tokenizer.json"))) return dir;
    looked += (looked.empty() ? "" : ", ") + dir;
  }
  return make_error("no tokenizer.json in " + looked +
                    ": the merged folder needs one for `kipp convert`; give the folder that holds it with --tokenizer");
}

Expected<std::string> config_json(const InitSource& base, SafetensorsDtype dtype) {
  if (!is_gguf(base)) return read_text_file(join_path(base.path, "config.json"));
  nlohmann::json config = nlohmann::json::parse(hf_config_json(base.config));
  config["torch_dtype"] = dtype == SafetensorsDtype::BF16 ? "bfloat16" : "float32";
  return config.dump(2) + "\n";
}

// The tensors of `layout` from `values`, each rounded once to `dtype`.
Status write_weights(const std::string& path, const ParameterLayout& layout, const std::vector<float>& values,
                     SafetensorsDtype dtype, uint64_t& bytes) {
  std::vector<uint16_t> halves(dtype == SafetensorsDtype::F32 ? 0 : layout.total());
  if (dtype == SafetensorsDtype::BF16) f32_to_bf16_row(values.data(), halves.data(), halves.size());
  if (dtype == SafetensorsDtype::F16) f32_to_f16_row(values.data(), halves.data(), halves.size());
  std::vector<SafetensorsWriteTensor> tensors;
  for (const ParamTensor& t : layout.tensors()) {
    const auto* data = dtype == SafetensorsDtype::F32 ? reinterpret_cast<const uint8_t*>(values.data() + t.offset)
                                                      : reinterpret_cast<const uint8_t*>(halves.data() + t.offset);
    tensors.push_back({t.name, dtype, t.shape, {data, t.count * safetensors_dtype_bytes(dtype)}});
  }
  bytes = layout.total() * safetensors_dtype_bytes(dtype);
  return write_safetensors(path, tensors, {{"format", "pt"}});
}

}  // namespace

uint64_t fold_lora(const ParameterLayout& layout, const PeftAdapter& adapter, std::span<float> values,
                   const std::function<void(size_t layer)>& on_layer) {
  const ModelConfig& config = layout.config();
  const AdapterLayout adapters(config, adapter.options);
  const double scale = adapter.options.scale();
  uint64_t folded = 0;
  for (size_t layer = 0; layer < config.num_layers; ++layer) {
    for (LoraTarget target : kAllLoraTargets) {
      const LoraAdapter* found = adapters.find(layer, target);
      if (!found) continue;
      const std::string name =
          "model.layers." + std::to_string(layer) + "." + std::string(lora_module_name(target)) + ".weight";
      const ParamTensor* weight = layout.find(name);
      add_low_rank(values.data() + weight->offset, adapter.values.data() + found->a, adapter.values.data() + found->b,
                   found->out, found->in, adapter.options.rank, scale);
      ++folded;
    }
    if (on_layer) on_layer(layer);
  }
  return folded;
}

Expected<MergeSummary> merge_lora(const InitSource& base, const std::string& adapter_dir, const std::string& out_dir,
                                  const MergeOptions& options) {
  // Everything that can be refused is checked before the base's weights are read.
  const ModelConfig& config = base.config;
  KIPP_RETURN_IF_ERROR(check_new_folder(out_dir));
  KIPP_ASSIGN_OR_RETURN(const PeftAdapter adapter, load_peft_adapter(adapter_dir, config));
  KIPP_ASSIGN_OR_RETURN(const std::string tokenizer_dir, tokenizer_folder(base, adapter_dir, options));
  KIPP_ASSIGN_OR_RETURN(const SafetensorsDtype dtype, output_dtype(base));
  KIPP_ASSIGN_OR_RETURN(const std::string config_text, config_json(base, dtype));

  const ParameterLayout layout(config);
  tell(options, "reading the base " + base.path);
  std::vector<float> values(layout.total());
  KIPP_RETURN_IF_ERROR(load_parameters(layout, base.path, values));

  MergeSummary summary;
  summary.dtype = std::string(safetensors_dtype_name(dtype));
  summary.merged_tensors = fold_lora(layout, adapter, values, [&](size_t layer) {
    tell(options, "merged layer " + std::to_string(layer + 1) + "/" + std::to_string(config.num_layers));
  });

  tell(options, "writing " + out_dir);
  const auto fill = [&](const std::string& dir) -> Status {
    KIPP_RETURN_IF_ERROR(write_text_file_atomic(join_path(dir, "config.json"), config_text));
    KIPP_RETURN_IF_ERROR(write_weights(join_path(dir, "model.safetensors"), layout, values, dtype, summary.bytes));
    for (const char* file : kTokenizerFiles) {
      const std::string source = join_path(tokenizer_dir, file);
      if (!file_exists(source)) continue;
      KIPP_ASSIGN_OR_RETURN(const std::string text, read_text_file(source));
      KIPP_RETURN_IF_ERROR(write_text_file_atomic(join_path(dir, file), text));
    }
    return {};
  };
  KIPP_RETURN_IF_ERROR(write_new_folder(out_dir, fill));
  return summary;
}

}  // namespace kipp::train
