#include "tokenizer/hf_tokenizer.h"

#include <map>
#include <nlohmann/json.hpp>

namespace kipp {

namespace {

using nlohmann::json;

struct AddedToken {
  std::string content;
  bool special = false;
};

Status check_pipeline(const json& tokenizer) {
  const json& model = tokenizer.at("model");
  if (model.value("type", std::string()) != "BPE") {
    return make_error("tokenizer.json: model.type is " + model.value("type", std::string("missing")) +
                      " (expected BPE)");
  }
  const json& normalizer = tokenizer.at("normalizer");
  if (!normalizer.is_null() && normalizer.value("type", std::string()) != "NFC") {
    return make_error("tokenizer.json: normalizer is " + normalizer.dump() + " (expected NFC or none)");
  }
  // The Qwen2 pre-tokenizer: Split(regex, Isolated) followed by ByteLevel without its own regex.
  const json& pre = tokenizer.at("pre_tokenizer");
  const json* split = nullptr;
  if (pre.value("type", std::string()) == "Sequence" && pre.contains("pretokenizers") &&
      pre["pretokenizers"].size() == 2 && pre["pretokenizers"][1].value("type", std::string()) == "ByteLevel") {
    split = &pre["pretokenizers"][0];
  }
  if (split == nullptr || split->value("type", std::string()) != "Split" || !split->contains("pattern") ||
      !(*split)["pattern"].contains("Regex") ||
      (*split)["pattern"]["Regex"].get<std::string>() != kQwen2PretokenizerPattern) {
    return make_error(
        "tokenizer.json: pre_tokenizer is not the Qwen2 byte-level pre-tokenizer (Split with the "
        "Qwen2 regex, then ByteLevel); Kipp implements exactly that one");
  }
  return ok_status();
}

std::string merge_text(const json& merge) {
  if (merge.is_string()) return merge.get<std::string>();
  if (merge.is_array() && merge.size() == 2) return merge[0].get<std::string>() + " " + merge[1].get<std::string>();
  return {};
}

}  // namespace

Expected<TokenizerMetadata> import_hf_tokenizer(const HfTokenizerFiles& files, uint32_t vocab_size,
                                                uint32_t bos_token_id, uint32_t eos_token_id) {
  const json tokenizer = json::parse(files.tokenizer_json, nullptr, false);
  if (tokenizer.is_discarded() || !tokenizer.is_object()) return make_error("tokenizer.json: not a JSON object");
  json config = json::object();
  if (!files.tokenizer_config_json.empty()) {
    config = json::parse(files.tokenizer_config_json, nullptr, false);
    if (config.is_discarded() || !config.is_object()) return make_error("tokenizer_config.json: not a JSON object");
  }
  TokenizerMetadata out;
  try {
    KIPP_RETURN_IF_ERROR(check_pipeline(tokenizer));
    std::map<uint32_t, std::string> by_id;
    for (const auto& [piece, id] : tokenizer.at("model").at("vocab").items()) {
      const auto value = id.get<int64_t>();
      if (value < 0 || value >= vocab_size) {
        return make_error("tokenizer.json: token '" + piece + "' has id " + std::to_string(value) +
                          " outside the embedding of " + std::to_string(vocab_size) + " rows");
      }
      if (!by_id.emplace(static_cast<uint32_t>(value), piece).second) {
        return make_error("tokenizer.json: id " + std::to_string(value) + " is used twice in the vocabulary");
      }
    }
    std::map<uint32_t, AddedToken> added;
    for (const json& token : tokenizer.at("added_tokens")) {
      added[token.at("id").get<uint32_t>()] = {token.at("content").get<std::string>(), token.value("special", false)};
    }
    if (config.contains("added_tokens_decoder")) {
      for (const auto& [id_text, token] : config["added_tokens_decoder"].items()) {
        added[static_cast<uint32_t>(std::stoul(id_text))] = {token.at("content").get<std::string>(),
                                                             token.value("special", false)};
      }
    }
    out.tokens.resize(vocab_size);
    out.token_types.assign(vocab_size, static_cast<int32_t>(TokenType::Unused));
    for (const auto& [id, piece] : by_id) {
      out.tokens[id] = piece;
      out.token_types[id] = static_cast<int32_t>(TokenType::Normal);
    }
    for (const auto& [id, token] : added) {
      if (id >= vocab_size) {
        return make_error("added token '" + token.content + "' has id " + std::to_string(id) +
                          " outside the embedding of " + std::to_string(vocab_size) + " rows");
      }
      const auto existing = by_id.find(id);
      if (existing != by_id.end() && existing->second != token.content) {
        return make_error("added token " + std::to_string(id) + " '" + token.content +
                          "' collides with vocabulary token '" + existing->second + "'");
      }
      out.tokens[id] = token.content;
      out.token_types[id] = static_cast<int32_t>(token.special ? TokenType::Control : TokenType::UserDefined);
    }
    for (uint32_t id = 0; id < vocab_size; ++id) {
      if (out.token_types[id] == static_cast<int32_t>(TokenType::Unused))
        out.tokens[id] = "[PAD" + std::to_string(id) + "]";
    }
    for (const json& merge : tokenizer.at("model").at("merges")) {
      std::string text = merge_text(merge);
      if (text.empty()) return make_error("tokenizer.json: malformed merge " + merge.dump());
      out.merges.push_back(std::move(text));
    }
    out.bos_token_id = bos_token_id;
    out.eos_token_id = eos_token_id;
    out.padding_token_id = bos_token_id;
    if (config.contains("pad_token") && config["pad_token"].is_string()) {
      const std::string pad = config["pad_token"].get<std::string>();
      for (const auto& [id, token] : added) {
        if (token.content == pad) out.padding_token_id = id;
      }
    }
    out.add_bos_token = config.value("add_bos_token", false);
    if (config.contains("chat_template") && config["chat_template"].is_string()) {
      out.chat_template = config["chat_template"].get<std::string>();
    }
  } catch (const std::exception& error) {
    return make_error(std::string("tokenizer files: ") + error.what());
  }
  return out;
}

}  // namespace kipp
