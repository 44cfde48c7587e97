#include "tokenizer/tokenizer_json_writer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tokenizer/pretokenizer_pattern.h"

namespace kipp {
namespace {

using nlohmann::ordered_json;

ordered_json byte_level_step() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
}

bool has_token(const TrainedTokenizer& tokenizer, const std::string& token) {
  return std::find(tokenizer.special_tokens.begin(), tokenizer.special_tokens.end(), token) !=
         tokenizer.special_tokens.end();
}

}  // namespace

std::string to_tokenizer_json(const TrainedTokenizer& tokenizer) {
  ordered_json out;
  out["version"] = "1.0";
  out["truncation"] = nullptr;
  out["padding"] = nullptr;
  ordered_json added = ordered_json::array();
  for (size_t i = 0; i < tokenizer.special_tokens.size(); ++i) {
    added.push_back({{"id", tokenizer.vocab.size() + i},
                     {"content", tokenizer.special_tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  out["added_tokens"] = std::move(added);
  out["normalizer"] = {{"type", "NFC"}};
  ordered_json split = {{"type", "Split"},
                        {"pattern", {{"Regex", kQwen2PretokenizerPattern}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  out["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", ordered_json::array({split, byte_level_step()})}};
  out["post_processor"] = byte_level_step();
  out["decoder"] = byte_level_step();
  ordered_json model;
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = nullptr;
  model["continuing_subword_prefix"] = "";
  model["end_of_word_suffix"] = "";
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  ordered_json vocab = ordered_json::object();
  for (size_t id = 0; id < tokenizer.vocab.size(); ++id) vocab[tokenizer.vocab[id]] = id;
  model["vocab"] = std::move(vocab);
  ordered_json merges = ordered_json::array();
  for (const auto& [left, right] : tokenizer.merges) {
    merges.push_back(ordered_json::array({tokenizer.vocab[left], tokenizer.vocab[right]}));
  }
  model["merges"] = std::move(merges);
  out["model"] = std::move(model);
  return out.dump(2) + "\n";
}

std::string to_tokenizer_config_json(const TrainedTokenizer& tokenizer) {
  ordered_json out;
  out["add_bos_token"] = false;
  out["add_prefix_space"] = false;
  ordered_json decoder = ordered_json::object();
  for (size_t i = 0; i < tokenizer.special_tokens.size(); ++i) {
    decoder[std::to_string(tokenizer.vocab.size() + i)] = {{"content", tokenizer.special_tokens[i]},
                                                           {"lstrip", false},
                                                           {"normalized", false},
                                                           {"rstrip", false},
                                                           {"single_word", false},
                                                           {"special", true}};
  }
  out["added_tokens_decoder"] = std::move(decoder);
  // The default tokens by role; the others are listed as additional special tokens.
  auto role = [&](const char* token) -> ordered_json { return has_token(tokenizer, token) ? ordered_json(token) : ordered_json(); };
  const ordered_json eos = has_token(tokenizer, "<eos>") ? role("<eos>") : role("<|im_end|>");
  std::vector<std::string> named;
  for (const ordered_json& token : {role("<bos>"), eos, role("<pad>"), role("<unk>"), role("<mask>")}) {
    if (token.is_string()) named.push_back(token.get<std::string>());
  }
  ordered_json additional = ordered_json::array();
  for (const std::string& token : tokenizer.special_tokens) {
    if (std::find(named.begin(), named.end(), token) == named.end()) additional.push_back(token);
  }
  out["additional_special_tokens"] = std::move(additional);
  out["bos_token"] = role("<bos>");
  out["clean_up_tokenization_spaces"] = false;
  out["eos_token"] = eos;
  out["errors"] = "replace";
  out["mask_token"] = role("<mask>");
  out["pad_token"] = role("<pad>");
  out["split_special_tokens"] = false;
  out["tokenizer_class"] = "Qwen2Tokenizer";
  out["unk_token"] = role("<unk>");
  return out.dump(2) + "\n";
}

}  // namespace kipp
