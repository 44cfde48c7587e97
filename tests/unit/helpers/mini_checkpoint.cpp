#include "unit/helpers/mini_checkpoint.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/files.h"
#include "core/half.h"
#include "format/safetensors.h"
#include "model/gguf_schema.h"
#include "tokenizer/hf_tokenizer.h"

namespace kipp::testing {
namespace {

using nlohmann::json;

std::string path_in(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

// GPT-2's byte-to-unicode table: printable bytes stand for themselves, the rest move to
// U+0100 and up, so every byte is one visible character.
std::vector<std::string> byte_level_alphabet() {
  std::vector<std::string> symbols(256);
  uint32_t next = 256;
  for (uint32_t byte = 0; byte < 256; ++byte) {
    const bool printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || (byte >= 174);
    const uint32_t code = printable ? byte : next++;
    std::string utf8;
    if (code < 0x80) {
      utf8 += static_cast<char>(code);
    } else {
      utf8 += static_cast<char>(0xC0 | (code >> 6));
      utf8 += static_cast<char>(0x80 | (code & 0x3F));
    }
    symbols[byte] = utf8;
  }
  return symbols;
}

json added_token(uint32_t id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

std::string tokenizer_json() {
  const std::vector<std::string> alphabet = byte_level_alphabet();
  json vocab = json::object();
  for (uint32_t id = 0; id < 256; ++id) vocab[alphabet[id]] = id;
  const std::string space = alphabet[' '];  // "Ġ"
  const std::vector<std::pair<std::string, std::string>> merges = {
      {space, "t"}, {"h", "e"}, {space + "t", "he"}, {"i", "n"}};
  json merge_list = json::array();
  uint32_t id = 256;
  for (const auto& [left, right] : merges) {
    vocab[left + right] = id++;
    merge_list.push_back(left + " " + right);
  }
  json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", json::array({added_token(kMiniEndOfText, "<|endoftext|>"),
                                    added_token(kMiniImStart, "<|im_start|>"), added_token(kMiniImEnd, "<|im_end|>")})},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"},
               {"pattern", {{"Regex", kQwen2PretokenizerPattern}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}})}}},
      {"post_processor",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merge_list}}}};
  return tokenizer.dump(2) + "\n";
}

std::string tokenizer_config_json(bool chat_template) {
  json decoder = json::object();
  decoder[std::to_string(kMiniEndOfText)] = {{"content", "<|endoftext|>"}, {"special", true}};
  decoder[std::to_string(kMiniImStart)] = {{"content", "<|im_start|>"}, {"special", true}};
  decoder[std::to_string(kMiniImEnd)] = {{"content", "<|im_end|>"}, {"special", true}};
  json config = {{"add_bos_token", false},  {"add_prefix_space", false},          {"added_tokens_decoder", decoder},
                 {"bos_token", nullptr},    {"eos_token", "<|im_end|>"},          {"pad_token", "<|endoftext|>"},
                 {"model_max_length", 256}, {"tokenizer_class", "Qwen2Tokenizer"}};
  if (chat_template) {
    config["chat_template"] =
        "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
        "'<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
  }
  return config.dump(2) + "\n";
}

std::string config_json(const ModelConfig& c) {
  const json config = {{"architectures", {"Qwen3ForCausalLM"}},
                       {"model_type", "qwen3"},
                       {"hidden_size", c.hidden_size},
                       {"num_hidden_layers", c.num_layers},
                       {"num_attention_heads", c.num_heads},
                       {"num_key_value_heads", c.num_kv_heads},
                       {"head_dim", c.head_dim},
                       {"intermediate_size", c.ffn_size},
                       {"vocab_size", c.vocab_size},
                       {"max_position_embeddings", c.context_length},
                       {"rope_theta", c.rope_theta},
                       {"rms_norm_eps", c.rms_norm_eps},
                       {"tie_word_embeddings", c.tie_embeddings},
                       {"bos_token_id", c.bos_token_id},
                       {"eos_token_id", c.eos_token_id},
                       {"hidden_act", "silu"},
                       {"attention_bias", false},
                       {"attention_dropout", 0.0},
                       {"rope_scaling", nullptr},
                       {"use_sliding_window", false},
                       {"torch_dtype", "bfloat16"}};
  return config.dump(2) + "\n";
}

std::string generation_config_json(const ModelConfig& c) {
  const json config = {{"bos_token_id", c.bos_token_id},
                       {"eos_token_id", {c.eos_token_id, kMiniEndOfText}},
                       {"do_sample", true},
                       {"temperature", 0.6}};
  return config.dump(2) + "\n";
}

// Deterministic across platforms (std::normal_distribution is not).
class Xorshift {
 public:
  explicit Xorshift(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  float uniform() {  // in [-1, 1)
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return static_cast<float>(state_ >> 40) / static_cast<float>(1u << 23) - 1.0f;
  }

 private:
  uint64_t state_;
};

struct HfTensor {
  std::string name;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;  // BF16
};

std::vector<HfTensor> make_tensors(const ModelConfig& config, uint32_t seed) {
  Xorshift rng(seed);
  std::vector<HfTensor> tensors;
  for (const TensorSpec& spec : expected_tensors(config, QuantScheme::BF16)) {
    HfTensor tensor{spec.hf_name, {spec.dims.rbegin(), spec.dims.rend()}, {}};
    uint64_t count = 1;
    for (uint64_t d : spec.dims) count *= d;
    const bool is_norm = spec.dims.size() == 1;
    std::vector<float> values(count);
    for (float& v : values) v = is_norm ? 1.0f + 0.1f * rng.uniform() : 0.05f * rng.uniform();
    std::vector<uint16_t> halves(count);
    f32_to_bf16_row(values.data(), halves.data(), count);
    tensor.bytes.resize(count * 2);
    std::memcpy(tensor.bytes.data(), halves.data(), tensor.bytes.size());
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

std::string shard_name(int index, int count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", index, count);
  return name;
}

Status write_weights(const std::string& dir, const MiniCheckpointOptions& options) {
  const std::vector<HfTensor> tensors = make_tensors(options.config, options.seed);
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  const auto to_write = [](const HfTensor& t) {
    return SafetensorsWriteTensor{t.name, SafetensorsDtype::BF16, t.shape, t.bytes};
  };
  if (options.shards <= 1) {
    std::vector<SafetensorsWriteTensor> all;
    for (const auto& t : tensors) all.push_back(to_write(t));
    return write_safetensors(path_in(dir, "model.safetensors"), all, metadata);
  }
  const size_t shards = static_cast<size_t>(options.shards);
  if (shards > tensors.size()) return make_error("more shards than tensors");
  json weight_map = json::object();
  uint64_t total_size = 0;
  for (size_t shard = 0; shard < shards; ++shard) {
    const std::string name = shard_name(static_cast<int>(shard + 1), options.shards);
    std::vector<SafetensorsWriteTensor> part;
    // Contiguous runs of tensors, as the Hub's sharded checkpoints have.
    for (size_t i = shard * tensors.size() / shards; i < (shard + 1) * tensors.size() / shards; ++i) {
      part.push_back(to_write(tensors[i]));
      weight_map[tensors[i].name] = name;
      total_size += tensors[i].bytes.size();
    }
    KIPP_RETURN_IF_ERROR(write_safetensors(path_in(dir, name), part, metadata));
  }
  const json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
  return write_text_file_atomic(path_in(dir, "model.safetensors.index.json"), index.dump(2) + "\n");
}

}  // namespace

ModelConfig mini_config() {
  ModelConfig config;
  config.hidden_size = 64;
  config.num_layers = 1;
  config.num_heads = 2;
  config.num_kv_heads = 2;
  config.head_dim = 32;
  config.ffn_size = 64;
  config.vocab_size = 300;
  config.context_length = 256;
  config.rope_theta = 1000000;
  config.rms_norm_eps = 1e-6;
  config.tie_embeddings = true;
  config.bos_token_id = kMiniEndOfText;
  config.eos_token_id = kMiniImEnd;
  return config;
}

Status write_mini_checkpoint(const std::string& dir, const MiniCheckpointOptions& options) {
  KIPP_RETURN_IF_ERROR(with_context(options.config.validate(), "mini checkpoint config"));
  if (options.config.vocab_size <= kMiniImEnd) {
    return make_error("mini checkpoint: vocab_size " + std::to_string(options.config.vocab_size) +
                      " must exceed the special token ids (up to " + std::to_string(kMiniImEnd) + ")");
  }
  KIPP_RETURN_IF_ERROR(write_text_file_atomic(path_in(dir, "config.json"), config_json(options.config)));
  if (options.generation_config) {
    KIPP_RETURN_IF_ERROR(
        write_text_file_atomic(path_in(dir, "generation_config.json"), generation_config_json(options.config)));
  }
  KIPP_RETURN_IF_ERROR(write_text_file_atomic(path_in(dir, "tokenizer.json"), tokenizer_json()));
  KIPP_RETURN_IF_ERROR(
      write_text_file_atomic(path_in(dir, "tokenizer_config.json"), tokenizer_config_json(options.chat_template)));
  return write_weights(dir, options);
}

}  // namespace kipp::testing
