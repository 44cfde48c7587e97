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
  // Written by hand around the JSON values: nlohmann's ordered objects look keys up linearly,
  // which is quadratic for a vocabulary of tens of thousands. One added token, vocabulary
  // entry or merge per line.
  auto str = [](const std::string& text) { return ordered_json(text).dump(); };
  std::string out = "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [";
  for (size_t i = 0; i < tokenizer.special_tokens.size(); ++i) {
    const ordered_json token = {{"id", tokenizer.vocab.size() + i},
                                {"content", tokenizer.special_tokens[i]},
                                {"single_word", false},
                                {"lstrip", false},
                                {"rstrip", false},
                                {"normalized", false},
                                {"special", true}};
    out += (i ? ",\n    " : "\n    ") + token.dump();
  }
  out += tokenizer.special_tokens.empty() ? "],\n" : "\n  ],\n";
  out += "  \"normalizer\": " + ordered_json{{"type", "NFC"}}.dump() + ",\n";
  const ordered_json split = {{"type", "Split"},
                              {"pattern", {{"Regex", kQwen2PretokenizerPattern}}},
                              {"behavior", "Isolated"},
                              {"invert", false}};
  const ordered_json pre = {{"type", "Sequence"}, {"pretokenizers", ordered_json::array({split, byte_level_step()})}};
  out += "  \"pre_tokenizer\": " + pre.dump() + ",\n";
  out += "  \"post_processor\": " + byte_level_step().dump() + ",\n";
  out += "  \"decoder\": " + byte_level_step().dump() + ",\n";
  out +=
      "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
      "    \"continuing_subword_prefix\": \"\",\n    \"end_of_word_suffix\": \"\",\n    \"fuse_unk\": false,\n"
      "    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {";
  for (size_t id = 0; id < tokenizer.vocab.size(); ++id) {
    out += (id ? ",\n      " : "\n      ") + str(tokenizer.vocab[id]) + ": " + std::to_string(id);
  }
  out += "\n    },\n    \"merges\": [";
  for (size_t i = 0; i < tokenizer.merges.size(); ++i) {
    const auto& [left, right] = tokenizer.merges[i];
    out += (i ? ",\n      [" : "\n      [") + str(tokenizer.vocab[left]) + ", " + str(tokenizer.vocab[right]) + "]";
  }
  out += tokenizer.merges.empty() ? "]\n  }\n}\n" : "\n    ]\n  }\n}\n";
  return out;
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
  auto role = [&](const char* token) -> ordered_json {
    return has_token(tokenizer, token) ? ordered_json(token) : ordered_json();
  };
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
