// `kipp tokenize` and `kipp detokenize`: the native tokenizer of a Kipp GGUF on the command line.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/escape.h"
#include "cli/input_files.h"
#include "cli/token_ids.h"
#include "cli/verify_flag.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kipp::cli {
namespace {

// The model's tokenizer, built from the data the GGUF embeds.
Expected<Tokenizer> load_tokenizer(const std::string& path, bool verify) {
  auto model = Model::open(path, LoadOptions{.verify_content_hash = verify});
  if (!model.ok()) return model.error();
  return with_context(Tokenizer::create(model->tokenizer()), path + ": tokenizer");
}

// `text` padded with spaces to `width` characters (code points, so "Ġworld" lines up).
std::string padded(const std::string& text, size_t width) {
  size_t chars = 0;
  for (unsigned char c : text) chars += (c & 0xC0) != 0x80;
  return chars >= width ? text : text + std::string(width - chars, ' ');
}

struct TokenizeArgs {
  std::string model;
  std::optional<std::string> text;
  std::optional<std::string> file;
  bool json = false;
  bool verbose = false;
  bool no_special = false;
  bool no_verify = false;
};

int run_tokenize(const TokenizeArgs& args) {
  if (args.text.has_value() == args.file.has_value()) return fail("give exactly one of --text and --file");
  auto read = text_or_file(args.text, args.file);
  if (!read.ok()) return fail(read.message());
  const std::string text = std::move(*read);
  auto tokenizer = load_tokenizer(args.model, !args.no_verify);
  if (!tokenizer.ok()) return fail(tokenizer.message());
  auto ids = tokenizer->encode(text, args.no_special ? SpecialTokens::PlainText : SpecialTokens::Parse);
  if (!ids.ok()) return fail((args.file ? *args.file : std::string("--text")) + ": " + ids.message());

  if (args.json) {
    nlohmann::json out;
    out["ids"] = *ids;
    out["count"] = ids->size();
    if (args.verbose) {
      auto tokens = nlohmann::json::array();
      for (uint32_t id : *ids) {
        auto piece = tokenizer->token_to_piece(id);
        auto bytes = tokenizer->token_to_bytes(id);
        if (!piece.ok()) return fail(piece.message());
        if (!bytes.ok()) return fail(bytes.message());
        // "text" is the token's bytes as a string; a partial UTF-8 sequence shows as U+FFFD.
        tokens.push_back({{"id", id}, {"piece", *piece}, {"text", *bytes}, {"bytes", escape_bytes(*bytes)}});
      }
      out["tokens"] = std::move(tokens);
    }
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  if (args.verbose) {
    std::printf("%8s  %-28s  %s\n", "id", "piece", "bytes");
    for (uint32_t id : *ids) {
      auto piece = tokenizer->token_to_piece(id);
      auto bytes = tokenizer->token_to_bytes(id);
      if (!piece.ok()) return fail(piece.message());
      if (!bytes.ok()) return fail(bytes.message());
      std::printf("%8u  %s  \"%s\"%s\n", id, padded(*piece, 28).c_str(), escape_bytes(*bytes).c_str(),
                  tokenizer->is_special_token(id) ? "  (special)"
                  : tokenizer->is_added_token(id) ? "  (added)"
                                                  : "");
    }
    std::printf("%zu tokens\n", ids->size());
    return 0;
  }
  std::string line;
  for (size_t i = 0; i < ids->size(); ++i) line += (i ? " " : "") + std::to_string((*ids)[i]);
  std::printf("%s\n", line.c_str());
  return 0;
}

int run_detokenize(const std::string& model, const std::string& ids_text, bool no_verify) {
  auto ids = parse_token_ids(ids_text);
  if (!ids.ok()) return fail(ids.message());
  auto tokenizer = load_tokenizer(model, !no_verify);
  if (!tokenizer.ok()) return fail(tokenizer.message());
  if (Status known = check_token_ids(*ids, tokenizer->vocab_size()); !known.ok()) return fail(known.message());
  auto text = tokenizer->decode(*ids);
  if (!text.ok()) return fail(text.message());
  if (std::fwrite(text->data(), 1, text->size(), stdout) != text->size() || std::fflush(stdout) != 0) {
    return fail("cannot write to standard output");
  }
  return 0;
}

}  // namespace

void register_tokenize(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("tokenize", "Encode text into token ids with a model's tokenizer");
  auto args = std::make_shared<TokenizeArgs>();
  auto text = std::make_shared<std::string>();
  auto file = std::make_shared<std::string>();
  command->add_option("-m,--model", args->model, "Kipp GGUF whose tokenizer to use")->required();
  auto* text_option = command->add_option("--text", *text, "The text to encode");
  auto* file_option = command->add_option("--file", *file, "Encode this file's contents ('-' for standard input)");
  text_option->excludes(file_option);
  command->add_flag("--json", args->json, "Print {\"ids\": [...], \"count\": n} (with --verbose, the tokens too)");
  command->add_flag("--verbose", args->verbose, "Print each token's id, vocabulary piece and bytes");
  command->add_flag("--no-special", args->no_special,
                    "Treat added tokens (<|im_start|>, <think>, ...) in the text as plain text");
  add_no_verify_flag(*command, args->no_verify);
  command->callback([&action, args, text, file, text_option, file_option] {
    TokenizeArgs chosen = *args;
    if (text_option->count() > 0) chosen.text = *text;
    if (file_option->count() > 0) chosen.file = *file;
    action = [chosen] { return run_tokenize(chosen); };
  });

  auto* detokenize = app.add_subcommand("detokenize", "Decode token ids into text (raw bytes on stdout)");
  auto model = std::make_shared<std::string>();
  auto ids = std::make_shared<std::string>();
  auto no_verify = std::make_shared<bool>(false);
  detokenize->add_option("-m,--model", *model, "Kipp GGUF whose tokenizer to use")->required();
  detokenize->add_option("--ids", *ids, "Token ids, separated by commas or spaces (e.g. 9707,1879)")->required();
  add_no_verify_flag(*detokenize, *no_verify);
  detokenize->callback(
      [&action, model, ids, no_verify] { action = [=] { return run_detokenize(*model, *ids, *no_verify); }; });
}

}  // namespace kipp::cli
