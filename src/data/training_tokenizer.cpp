#include "data/training_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "tokenizer/hf_tokenizer.h"

namespace kipp::data {
namespace {

using nlohmann::json;

std::string neighbour(const std::string& path, const char* name) {
  return (std::filesystem::path(path).parent_path() / name).string();
}

Expected<TrainingTokenizer> read_tokenizer_files(const std::string& tokenizer_json_path, bool require_end_token) {
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
    for (const auto& item : parsed.at("model").at("vocab").items())
      max_id = std::max<uint64_t>(max_id, item.value().get<uint64_t>());
    for (const json& token : parsed.at("added_tokens")) {
      const uint64_t id = token.at("id").get<uint64_t>();
      if (id >= (uint64_t{1} << 31)) return make_error(tokenizer_json_path + ": token ids beyond 2^31");
      added[token.at("content").get<std::string>()] = uint32_t(id);
      max_id = std::max<uint64_t>(max_id, id);
    }
  } catch (const std::exception& error) {
    return make_error(tokenizer_json_path + ": " + error.what());
  }
  if (max_id >= (uint64_t{1} << 31)) return make_error(tokenizer_json_path + ": token ids beyond 2^31");
  const uint32_t vocab_size = uint32_t(max_id + 1);
  auto first_of = [&](std::initializer_list<const char*> names) -> std::optional<uint32_t> {
    for (const char* name : names) {
      const auto it = added.find(name);
      if (it != added.end()) return it->second;
    }
    return std::nullopt;
  };
  const std::optional<uint32_t> eos = first_of({"<eos>", "<|endoftext|>", "</s>"});
  if (!eos && require_end_token) {
    return make_error(tokenizer_json_path +
                      ": no end-of-document token (<eos>, <|endoftext|> or </s>) among the added tokens");
  }
  const uint32_t eos_id = eos.value_or(0);
  const uint32_t bos_id = first_of({"<bos>"}).value_or(eos_id);
  HfTokenizerFiles files{tokenizer_json, tokenizer_config_json};
  auto metadata = import_hf_tokenizer(files, vocab_size, bos_id, eos_id);
  if (!metadata) return make_error(tokenizer_json_path + ": " + metadata.message());
  auto tokenizer = Tokenizer::create(*metadata);
  if (!tokenizer) return make_error(tokenizer_json_path + ": " + tokenizer.message());
  std::string fingerprint = "tokenizer.json\n" + tokenizer_json + "\ntokenizer_config.json\n" + tokenizer_config_json;
  return TrainingTokenizer{
      std::move(*tokenizer), std::move(tokenizer_json), std::move(tokenizer_config_json), vocab_size, bos_id, eos_id,
      std::move(fingerprint)};
}

}  // namespace

Expected<TrainingTokenizer> load_tokenizer_json(const std::string& tokenizer_json_path) {
  return read_tokenizer_files(tokenizer_json_path, false);
}

Expected<TrainingTokenizer> load_training_tokenizer(const std::string& tokenizer_json_path) {
  return read_tokenizer_files(tokenizer_json_path, true);
}

Expected<TrainingTokenizer> tokenizer_from_metadata(const TokenizerMetadata& metadata) {
  KIPP_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::create(metadata));
  // The GGUF's vocabulary, types and merges in order: what encoding depends on.
  std::string fingerprint = "gguf " + metadata.model + " " + metadata.pre + "\n";
  for (size_t i = 0; i < metadata.tokens.size(); ++i) {
    fingerprint += metadata.tokens[i] + "\t" +
                   std::to_string(i < metadata.token_types.size() ? metadata.token_types[i] : 0) + "\n";
  }
  for (const std::string& merge : metadata.merges) fingerprint += merge + "\n";
  const uint32_t vocab_size = tokenizer.vocab_size();
  return TrainingTokenizer{std::move(tokenizer),  "", "", vocab_size, metadata.bos_token_id, metadata.eos_token_id,
                           std::move(fingerprint)};
}

}  // namespace kipp::data
