#include "train/evaluation.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include <cblas.h>

#include "core/files.h"
#include "data/packed_dataset.h"
#include "model/model.h"
#include "train/lora_merge.h"
#include "train/peft_adapter.h"
#include "train/training_data.h"
#include "train/training_model.h"

namespace kipp::train {
Expected<data::TrainingTokenizer> load_tokenizer_of(const std::string& path) {
  if (path.ends_with(".gguf")) {
    LoadOptions options;
    options.verify_content_hash = false;
    KIPP_ASSIGN_OR_RETURN(Model model, Model::open(path, options));
    return data::tokenizer_from_metadata(model.tokenizer());
  }
  if (path.ends_with(".json")) return data::load_training_tokenizer(path);
  return data::load_training_tokenizer(join_path(path, "tokenizer.json"));
}

namespace {

Expected<EvalModel> load_base_model(const std::string& path) {
  if (path.ends_with(".gguf")) {
    KIPP_ASSIGN_OR_RETURN(Model model, Model::open(path));
    KIPP_ASSIGN_OR_RETURN(data::TrainingTokenizer tokenizer, data::tokenizer_from_metadata(model.tokenizer()));
    EvalModel out{ParameterLayout(model.config()), {}, std::move(tokenizer)};
    out.params.resize(out.layout.total());
    KIPP_RETURN_IF_ERROR(load_parameters(out.layout, path, out.params));
    return out;
  }
  const std::string config_path = join_path(path, "config.json");
  if (!file_exists(config_path)) {
    if (file_exists(join_path(path, kAdapterConfigFile)))
      return make_error(path + " is a LoRA adapter folder, not a model: give its base model and the adapter with " +
                        "--adapter " + path);
    return make_error(path + ": not a GGUF file nor a checkpoint folder with config.json");
  }
  KIPP_ASSIGN_OR_RETURN(std::string config_text, read_text_file(config_path));
  auto config = parse_hf_config(config_text);
  if (!config) return make_error(config_path + ": " + config.message());
  KIPP_ASSIGN_OR_RETURN(data::TrainingTokenizer tokenizer,
                        data::load_training_tokenizer(join_path(path, "tokenizer.json")));
  EvalModel out{ParameterLayout(*config), {}, std::move(tokenizer)};
  out.params.resize(out.layout.total());
  KIPP_RETURN_IF_ERROR(load_parameters(out.layout, path, out.params));
  return out;
}

}  // namespace

Expected<EvalModel> load_eval_model(const std::string& path, const std::string& adapter_dir) {
  KIPP_ASSIGN_OR_RETURN(EvalModel model, load_base_model(path));
  if (adapter_dir.empty()) return model;
  auto adapter = load_peft_adapter(adapter_dir, model.layout.config());
  if (!adapter) return make_error("--adapter " + adapter_dir + ": " + adapter.message());
  fold_lora(model.layout, *adapter, model.params);
  return model;
}

Expected<LossSums> evaluate_windows(TrainingModel& model, std::span<const float> params, uint64_t count, uint32_t batch,
                                    uint32_t seq_len, const WindowFill& fill,
                                    const std::function<void(uint64_t done, uint64_t total)>& progress) {
  std::vector<int32_t> inputs(size_t(batch) * seq_len), targets(inputs.size());
  LossSums total;
  for (uint64_t first = 0; first < count; first += batch) {
    const uint32_t rows = uint32_t(std::min<uint64_t>(batch, count - first));
    for (uint32_t r = 0; r < rows; ++r)
      fill(first + r, inputs.data() + size_t(r) * seq_len, targets.data() + size_t(r) * seq_len);
    TokenBatch tokens;
    tokens.inputs = std::span<const int32_t>(inputs).first(size_t(rows) * seq_len);
    tokens.targets = std::span<const int32_t>(targets).first(size_t(rows) * seq_len);
    tokens.batch = rows;
    tokens.seq_len = seq_len;
    KIPP_ASSIGN_OR_RETURN(LossSums sums, model.evaluate(params, tokens));
    total.loss_sum += sums.loss_sum;
    total.counted += sums.counted;
    if (progress) progress(first + rows, count);
  }
  return total;
}

Expected<EvalResult> evaluate_model(EvalModel& model, const EvalOptions& options, const EvalEvents& events) {
  const ModelConfig& config = model.layout.config();
  if (options.seq_len == 0 || options.seq_len > config.context_length) {
    return make_error("--seq-len " + std::to_string(options.seq_len) + " is outside 1.." +
                      std::to_string(config.context_length) + " (the model's context)");
  }
  if (options.batch == 0) return make_error("--batch must be positive");
  if (model.tokenizer.vocab_size > config.vocab_size) {
    return make_error("the tokenizer has " + std::to_string(model.tokenizer.vocab_size) + " ids but the model only " +
                      std::to_string(config.vocab_size));
  }
  const int threads = options.threads ? int(options.threads) : omp_get_num_procs();
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);

  KIPP_ASSIGN_OR_RETURN(data::CacheSource source, cache_source(options.data, options.data.train));
  KIPP_ASSIGN_OR_RETURN(data::TokenCache cache, data::TokenCache::open_or_build(cache_root(options.data), source,
                                                                                model.tokenizer, events.cache));
  EvalResult result;
  result.data = cache.stats();
  KIPP_ASSIGN_OR_RETURN(data::PackedDataset dataset,
                        data::PackedDataset::create(std::move(cache), std::nullopt, options.seq_len, 0.0));
  const uint64_t windows =
      options.max_windows ? std::min(options.max_windows, dataset.train_count()) : dataset.train_count();

  TrainingModelOptions model_options;
  model_options.max_batch = options.batch;
  model_options.seq_len = options.seq_len;
  KIPP_ASSIGN_OR_RETURN(std::unique_ptr<TrainingModel> forward, TrainingModel::create(model.layout, model_options));
  auto fill = [&](uint64_t index, int32_t* inputs, int32_t* targets) { dataset.fill_train(index, inputs, targets); };
  KIPP_ASSIGN_OR_RETURN(LossSums sums, evaluate_windows(*forward, model.params, windows, options.batch, options.seq_len,
                                                        fill, events.on_progress));
  result.counted = sums.counted;
  const double loss_sum = sums.loss_sum;
  if (result.counted == 0) return make_error("no target in the data carries loss");
  result.windows = windows;
  result.loss = loss_sum / double(result.counted);
  result.perplexity = std::exp(result.loss);
  return result;
}

}  // namespace kipp::train
