#include "train/training_data.h"

namespace kipp::train {

Expected<data::CacheSource> cache_source(const DataSection& data, const std::vector<std::string>& inputs) {
  data::CacheSource source;
  source.inputs = inputs;
  source.raw_tokens = data.format == "tokens";
  source.raw_type = data.token_dtype == "uint32" ? data::TokenFileType::U32 : data::TokenFileType::U16;
  if (!source.raw_tokens) {
    KIPP_ASSIGN_OR_RETURN(source.dataset.format, data::parse_dataset_format(data.format));
  }
  source.dataset.text_field = data.text_field;
  source.dataset.document_separator = data.document_separator;
  source.dataset.strict = data.strict;
  KIPP_ASSIGN_OR_RETURN(source.tokens.chat_format, parse_chat_format(data.chat_format));
  source.shuffle_buffer = data.shuffle_buffer;
  source.shuffle_seed = data.seed;
  return source;
}

std::string cache_root(const DataSection& data) {
  return data.cache_dir.empty() ? data::default_cache_root() : data.cache_dir;
}

Expected<data::PackedDataset> load_training_data(const TrainConfig& config, const data::TrainingTokenizer& tokenizer,
                                                 const data::CacheEvents& events) {
  const std::string root = cache_root(config.data);
  auto open = [&](const std::vector<std::string>& inputs, const char* what) -> Expected<data::TokenCache> {
    KIPP_ASSIGN_OR_RETURN(data::CacheSource source, cache_source(config.data, inputs));
    auto cache = data::TokenCache::open_or_build(root, source, tokenizer, events);
    if (!cache) return make_error(std::string(what) + ": " + cache.message());
    return cache;
  };
  KIPP_ASSIGN_OR_RETURN(data::TokenCache train, open(config.data.train, "data.train"));
  std::optional<data::TokenCache> validation;
  if (!config.data.validation.empty()) {
    KIPP_ASSIGN_OR_RETURN(validation, open(config.data.validation, "data.validation"));
  }
  return data::PackedDataset::create(std::move(train), std::move(validation), config.train.seq_len,
                                     config.data.validation_fraction);
}

}  // namespace kipp::train
