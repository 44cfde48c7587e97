#include "data/token_corpus.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "convert/hf_tokenizer.h"
#include "core/files.h"
#include "core/random.h"

namespace kipp::data {
namespace {

using nlohmann::json;

std::string neighbour(const std::string& path, const char* name) {
  return (std::filesystem::path(path).parent_path() / name).string();
}

}  // namespace

Expected<TrainingTokenizer> load_training_tokenizer(const std::string& tokenizer_json_path) {
  KIPP_ASSIGN_OR_RETURN(std::string tokenizer_json, read_text_file(tokenizer_json_path));
  std::string tokenizer_config_json;
  const std::string config_path = neighbour(tokenizer_json_path, "tokenizer_config.json");
  if (file_exists(config_path)) {
    KIPP_ASSIGN_OR_RETURN(tokenizer_config_json, read_text_file(config_path));
  }
  const json parsed = json::parse(tokenizer_json, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) return make_error(tokenizer_json_path + ": not a JSON object");
  std::map<std::string, uint32_t> added;
  uint64_t max_id = 0;
  try {
    for (const auto& item : parsed.at("model").at("vocab").items()) max_id = std::max<uint64_t>(max_id, item.value().get<uint64_t>());
    for (const json& token : parsed.at("added_tokens")) {
      const uint32_t id = token.at("id").get<uint32_t>();
      added[token.at("content").get<std::string>()] = id;
      max_id = std::max<uint64_t>(max_id, id);
    }
  } catch (const std::exception& error) {
    return make_error(tokenizer_json_path + ": " + error.what());
  }
  if (max_id >= (uint64_t{1} << 31)) return make_error(tokenizer_json_path + ": token ids beyond 2^31");
  const uint32_t vocab_size = uint32_t(max_id + 1);
  auto first_of = [&](std::initializer_list<const char*> names) -> const uint32_t* {
    for (const char* name : names) {
      const auto it = added.find(name);
      if (it != added.end()) return &it->second;
    }
    return nullptr;
  };
  const uint32_t* eos = first_of({"<eos>", "<|endoftext|>", "</s>"});
  if (!eos) return make_error(tokenizer_json_path + ": no end-of-document token (<eos>, <|endoftext|> or </s>) among the added tokens");
  const uint32_t* bos = first_of({"<bos>"});
  const uint32_t bos_id = bos ? *bos : *eos;
  HfTokenizerFiles files{tokenizer_json, tokenizer_config_json};
  auto metadata = import_hf_tokenizer(files, vocab_size, bos_id, *eos);
  if (!metadata) return make_error(tokenizer_json_path + ": " + metadata.message());
  auto tokenizer = Tokenizer::create(*metadata);
  if (!tokenizer) return make_error(tokenizer_json_path + ": " + tokenizer.message());
  return TrainingTokenizer{std::move(*tokenizer), std::move(tokenizer_json), std::move(tokenizer_config_json),
                           vocab_size, bos_id, *eos};
}

Expected<std::vector<uint32_t>> read_text_corpus(const std::vector<std::string>& files, const TrainingTokenizer& tokenizer,
                                                 const std::function<void(const std::string&)>& progress) {
  std::vector<uint32_t> tokens;
  for (const std::string& path : files) {
    KIPP_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
    auto ids = tokenizer.tokenizer.encode(text, SpecialTokens::PlainText);
    if (!ids) return make_error(path + ": " + ids.message());
    tokens.insert(tokens.end(), ids->begin(), ids->end());
    tokens.push_back(tokenizer.eos_id);
    if (progress) {
      progress(path + ": " + std::to_string(text.size()) + " bytes, " + std::to_string(ids->size()) + " tokens");
    }
  }
  return tokens;
}

static_assert(std::endian::native == std::endian::little, "token files are little-endian ids copied as they are");

Expected<std::vector<uint32_t>> read_token_files(const std::vector<std::string>& files, TokenFileType type,
                                                 uint32_t vocab_size) {
  const size_t width = type == TokenFileType::U16 ? 2 : 4;
  std::vector<uint32_t> tokens;
  for (const std::string& path : files) {
    KIPP_ASSIGN_OR_RETURN(std::string bytes, read_text_file(path));
    if (bytes.size() % width != 0) {
      return make_error(path + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of " +
                        std::to_string(width) + "-byte token ids");
    }
    const size_t count = bytes.size() / width;
    const size_t base = tokens.size();
    tokens.resize(base + count);
    for (size_t i = 0; i < count; ++i) {
      uint32_t id = 0;
      std::memcpy(&id, bytes.data() + i * width, width);  // the host is little-endian (asserted above)
      if (id >= vocab_size) {
        return make_error(path + ": token " + std::to_string(i) + " has id " + std::to_string(id) +
                          ", not below the vocabulary size " + std::to_string(vocab_size));
      }
      tokens[base + i] = id;
    }
  }
  return tokens;
}

Expected<TokenWindows> TokenWindows::create(std::vector<uint32_t> tokens, uint32_t seq_len, double validation_fraction) {
  if (seq_len == 0) return make_error("sequence length must be positive");
  const uint64_t windows = tokens.size() > seq_len ? (tokens.size() - 1) / seq_len : 0;
  const uint64_t validation = validation_fraction > 0 ? std::max<uint64_t>(1, uint64_t(double(windows) * validation_fraction)) : 0;
  if (windows < validation + 1) {
    return make_error("the corpus has " + std::to_string(tokens.size()) + " tokens: too few for one training window of " +
                      std::to_string(seq_len + 1) + " tokens" +
                      (validation ? " plus " + std::to_string(validation) + " validation window(s)" : std::string()) +
                      " (add data, lower train.seq_len or data.validation_fraction)");
  }
  return TokenWindows(std::move(tokens), seq_len, windows - validation, validation);
}

void TokenWindows::fill(uint64_t window, int32_t* inputs, int32_t* targets) const {
  const uint32_t* start = tokens_.data() + window * seq_len_;
  for (uint32_t i = 0; i < seq_len_; ++i) {
    inputs[i] = int32_t(start[i]);
    targets[i] = int32_t(start[i + 1]);
  }
}

void TokenWindows::fill_train(uint64_t index, int32_t* inputs, int32_t* targets) const { fill(index, inputs, targets); }

void TokenWindows::fill_validation(uint64_t index, int32_t* inputs, int32_t* targets) const {
  fill(train_count_ + index, inputs, targets);
}

std::vector<uint64_t> epoch_order(uint64_t count, uint64_t seed, uint64_t epoch) {
  std::vector<uint64_t> order(count);
  for (uint64_t i = 0; i < count; ++i) order[i] = i;
  const uint64_t key = mix64(seed) ^ mix64(~epoch);
  for (uint64_t i = count; i > 1; --i) {
    // The modulo bias is below count / 2^64: irrelevant for a data order.
    const uint64_t j = counter_random(key, i) % i;
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

}  // namespace kipp::data
