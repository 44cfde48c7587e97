#include "model/tokenizer_metadata.h"

#include "model/gguf_schema.h"

namespace kipp {
namespace {

Expected<std::vector<std::string>> require_string_array(const GgufFile& file, std::string_view key) {
  const GgufValue* value = file.find(key);
  if (value == nullptr) return make_error("GGUF metadata: required key '" + std::string(key) + "' is missing");
  auto items = value->as_string_array();
  if (!items) return make_error("GGUF metadata: '" + std::string(key) + "' must be an array of strings");
  return std::move(*items);
}

Expected<bool> require_bool(const GgufFile& file, std::string_view key) {
  const GgufValue* value = file.find(key);
  if (value == nullptr || !value->as_bool()) {
    return make_error("GGUF metadata: '" + std::string(key) + "' must be present and a bool");
  }
  return *value->as_bool();
}

}  // namespace

void add_tokenizer_metadata(GgufWriter& writer, const TokenizerMetadata& tokenizer) {
  using namespace gguf_key;
  writer.add_metadata(std::string(kTokenizerModel), GgufValue::string(tokenizer.model));
  writer.add_metadata(std::string(kTokenizerPre), GgufValue::string(tokenizer.pre));
  writer.add_metadata(std::string(kTokens), GgufValue::string_array(tokenizer.tokens));
  writer.add_metadata(std::string(kTokenTypes), GgufValue::i32_array(tokenizer.token_types));
  writer.add_metadata(std::string(kMerges), GgufValue::string_array(tokenizer.merges));
  writer.add_metadata(std::string(kEosTokenId), GgufValue::u32(tokenizer.eos_token_id));
  writer.add_metadata(std::string(kPaddingTokenId), GgufValue::u32(tokenizer.padding_token_id));
  writer.add_metadata(std::string(kBosTokenId), GgufValue::u32(tokenizer.bos_token_id));
  writer.add_metadata(std::string(kAddBosToken), GgufValue::boolean(tokenizer.add_bos_token));
  if (tokenizer.chat_template) {
    writer.add_metadata(std::string(kChatTemplate), GgufValue::string(*tokenizer.chat_template));
  }
}

Expected<TokenizerMetadata> read_tokenizer_metadata(const GgufFile& file, uint32_t vocab_size) {
  using namespace gguf_key;
  TokenizerMetadata tokenizer;
  KIPP_ASSIGN_OR_RETURN(tokenizer.model, require_string(file, kTokenizerModel));
  if (tokenizer.model != "gpt2") {
    return make_error("GGUF metadata: tokenizer.ggml.model is '" + tokenizer.model + "' (expected 'gpt2')");
  }
  KIPP_ASSIGN_OR_RETURN(tokenizer.pre, require_string(file, kTokenizerPre));
  if (tokenizer.pre != "qwen2") {
    return make_error("GGUF metadata: tokenizer.ggml.pre is '" + tokenizer.pre + "' (expected 'qwen2')");
  }
  KIPP_ASSIGN_OR_RETURN(tokenizer.tokens, require_string_array(file, kTokens));
  if (tokenizer.tokens.size() != vocab_size) {
    return make_error("GGUF metadata: tokenizer.ggml.tokens has " + std::to_string(tokenizer.tokens.size()) +
                      " entries (expected " + std::to_string(vocab_size) + ", the vocabulary size)");
  }
  const GgufValue* types = file.find(kTokenTypes);
  const auto* type_items = types ? types->as_array() : nullptr;
  if (type_items == nullptr || types->array_type() != GgufValueType::INT32) {
    return make_error("GGUF metadata: tokenizer.ggml.token_type must be an array of int32");
  }
  if (type_items->size() != vocab_size) {
    return make_error("GGUF metadata: tokenizer.ggml.token_type has " + std::to_string(type_items->size()) +
                      " entries (expected " + std::to_string(vocab_size) + ")");
  }
  tokenizer.token_types.reserve(type_items->size());
  for (size_t id = 0; id < type_items->size(); ++id) {
    const int64_t type = *(*type_items)[id].as_int();
    if (type < 1 || type > 6) {
      return make_error("GGUF metadata: tokenizer.ggml.token_type[" + std::to_string(id) + "] is " +
                        std::to_string(type) + " (expected 1..6)");
    }
    tokenizer.token_types.push_back(static_cast<int32_t>(type));
  }
  KIPP_ASSIGN_OR_RETURN(tokenizer.merges, require_string_array(file, kMerges));
  for (size_t rank = 0; rank < tokenizer.merges.size(); ++rank) {
    const auto& merge = tokenizer.merges[rank];
    const auto space = merge.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == merge.size() ||
        merge.find(' ', space + 1) != std::string::npos) {
      return make_error("GGUF metadata: tokenizer.ggml.merges[" + std::to_string(rank) + "] '" + merge +
                        "' is not two tokens separated by one space");
    }
  }
  KIPP_ASSIGN_OR_RETURN(tokenizer.bos_token_id, require_u32(file, kBosTokenId));
  KIPP_ASSIGN_OR_RETURN(tokenizer.eos_token_id, require_u32(file, kEosTokenId));
  KIPP_ASSIGN_OR_RETURN(tokenizer.padding_token_id, require_u32(file, kPaddingTokenId));
  for (const auto& [key, id] :
       {std::pair{kBosTokenId, tokenizer.bos_token_id}, std::pair{kEosTokenId, tokenizer.eos_token_id},
        std::pair{kPaddingTokenId, tokenizer.padding_token_id}}) {
    if (id >= vocab_size) {
      return make_error("GGUF metadata: " + std::string(key) + " " + std::to_string(id) +
                        " is outside the vocabulary of " + std::to_string(vocab_size));
    }
  }
  KIPP_ASSIGN_OR_RETURN(tokenizer.add_bos_token, require_bool(file, kAddBosToken));
  if (const GgufValue* chat_template = file.find(kChatTemplate)) {
    if (chat_template->as_string() == nullptr)
      return make_error("GGUF metadata: tokenizer.chat_template must be a string");
    tokenizer.chat_template = *chat_template->as_string();
  }
  return tokenizer;
}

}  // namespace kipp
