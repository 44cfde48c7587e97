// The run's data as the config describes it: records read, tokenized into the cache (or the
// cache reused), packed into windows, with a validation share or set.
#pragma once

#include "core/status.h"
#include "data/packed_dataset.h"
#include "data/token_cache.h"
#include "data/training_tokenizer.h"
#include "train/train_config.h"

namespace kipp::train {

// How the files of `data.train` (or `data.validation`) become a cache.
Expected<data::CacheSource> cache_source(const DataSection& data, const std::vector<std::string>& inputs);

// data.cache_dir, or the default cache root.
std::string cache_root(const DataSection& data);

Expected<data::PackedDataset> load_training_data(const TrainConfig& config, const data::TrainingTokenizer& tokenizer,
                                                 const data::CacheEvents& events);

}  // namespace kipp::train
