// `kipp data preview`: how a dataset's records are read, rendered, tokenized and masked, before
// a run spends hours on them.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/escape.h"
#include "data/record_tokens.h"
#include "data/records.h"
#include "train/evaluation.h"

namespace kipp::cli {
namespace {

struct PreviewArgs {
  std::vector<std::string> inputs;
  std::string tokenizer;
  std::string format = "auto";
  std::string text_field = "text";
  std::string separator;
  std::string chat_format = "chatml";
  uint32_t count = 3;
  bool strict = false;
  bool color = isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR");
};

constexpr const char* kCounted = "\033[1;32m";  // carries loss
constexpr const char* kMasked = "\033[2m";      // context only
constexpr const char* kReset = "\033[0m";

// A run of token bytes shown readably: escaped, but line breaks kept as line breaks.
std::string readable(const std::string& bytes) {
  std::string out = escape_text(bytes);
  for (size_t at = out.find("\\n"); at != std::string::npos; at = out.find("\\n", at + 3)) out.insert(at + 2, "\n");
  return out;
}

// Tokens joined back into text; counted tokens in green (or between ⟦ and ⟧ without color).
std::string masked_view(const data::RecordTokens& tokens, const data::TrainingTokenizer& tokenizer, bool color) {
  std::string out;
  size_t begin = 0;
  while (begin < tokens.ids.size()) {
    const bool counted = tokens.counts[begin] != 0;
    std::string bytes;
    size_t end = begin;
    for (; end < tokens.ids.size() && (tokens.counts[end] != 0) == counted; ++end) {
      auto piece = tokenizer.tokenizer.token_to_bytes(tokens.ids[end]);
      bytes += piece ? *piece : "<?>";
    }
    if (color) {
      out += std::string(counted ? kCounted : kMasked) + readable(bytes) + kReset;
    } else {
      out += counted ? "⟦" + readable(bytes) + "⟧" : readable(bytes);
    }
    begin = end;
  }
  return out;
}

int run_preview(const PreviewArgs& args) {
  auto tokenizer = train::load_tokenizer_of(args.tokenizer);
  if (!tokenizer) return fail(tokenizer.message());
  data::DatasetOptions options;
  auto format = data::parse_dataset_format(args.format);
  if (!format) return fail("--format: " + format.message());
  options.format = *format;
  options.text_field = args.text_field;
  options.document_separator = args.separator;
  options.strict = args.strict;
  data::RecordTokenOptions token_options;
  auto chat_format = parse_chat_format(args.chat_format);
  if (!chat_format) return fail("--chat-format: " + chat_format.message());
  token_options.chat_format = *chat_format;
  auto files = data::expand_inputs(args.inputs);
  if (!files) return fail(files.message());
  auto reader = data::RecordReader::open(
      *files, options, [](const std::string& line) { std::fprintf(stderr, "malformed: %s\n", line.c_str()); });
  if (!reader) return fail(reader.message());
  data::Record record;
  uint32_t shown = 0;
  while (shown < args.count) {
    auto more = (*reader)->next(record);
    if (!more) return fail(more.message());
    if (!*more) break;
    ++shown;
    auto tokens = data::tokenize_record(record, *tokenizer, token_options);
    std::printf("%s── %s (%s) ──%s\n", args.color ? "\033[1m" : "", record.origin.to_string().c_str(),
                record.is_conversation() ? ("conversation, " + args.chat_format).c_str() : "text",
                args.color ? kReset : "");
    if (!tokens) {
      std::printf("cannot tokenize: %s\n\n", tokens.message().c_str());
      continue;
    }
    size_t counted = 0;
    for (uint8_t c : tokens->counts) counted += c;
    std::printf("%zu tokens, %zu carry loss%s%s\n", tokens->ids.size(), counted,
                record.ends_document ? "" : " (a piece of a longer document)",
                record.is_conversation() && counted == 0 ? " — no assistant turn: training skips this record" : "");
    std::printf("%s\n", masked_view(*tokens, *tokenizer, args.color).c_str());
    std::printf("ids:");
    for (size_t i = 0; i < tokens->ids.size() && i < 64; ++i) std::printf(" %u", tokens->ids[i]);
    std::printf("%s\n\n", tokens->ids.size() > 64 ? " ..." : "");
  }
  const data::ReadStats& stats = (*reader)->stats();
  std::printf(
      "%u records shown; %lu malformed skipped so far%s\n", shown, (unsigned long)stats.malformed,
      args.color ? " (green: tokens that carry loss, dim: context only)" : " (⟦ ⟧ mark the tokens that carry loss)");
  return 0;
}

}  // namespace

void register_data(CLI::App& app, Action& action) {
  auto* data_command = app.add_subcommand("data", "Inspect training data");
  data_command->require_subcommand(1);
  auto* command = data_command->add_subcommand("preview", "Show how records are read, rendered, tokenized and masked");
  command->footer(R"(
Formats: auto (by extension and the first record's keys), text, jsonl, csv, parquet, alpaca,
sharegpt, openai. Conversations are rendered with --chat-format; on a terminal the tokens
that carry loss are green and the context dim (NO_COLOR or a pipe: marked with ⟦ ⟧).

Examples:
  kipp data preview chats.jsonl --tokenizer tokenizer.json
  kipp data preview /usr/share/games/fortunes/fortunes --separator % -t runs/tiny/latest -n 5)");
  auto args = std::make_shared<PreviewArgs>();
  command->add_option("inputs", args->inputs, "Files, globs or folders")->required();
  command->add_option("-t,--tokenizer", args->tokenizer, "tokenizer.json, a checkpoint folder or a GGUF")->required();
  command->add_option("--format", args->format, "Dataset format")->capture_default_str();
  command->add_option("--text-field", args->text_field, "JSONL key / CSV or Parquet column")->capture_default_str();
  command->add_option("--separator", args->separator, "Text files: a line equal to this ends a document");
  command->add_option("--chat-format", args->chat_format, "How conversations are rendered")->capture_default_str();
  command->add_option("-n,--count", args->count, "Records to show")->capture_default_str();
  command->add_flag("--strict", args->strict, "Fail on the first malformed record");
  command->add_flag("!--no-color", args->color, "Mark loss tokens with ⟦ ⟧ instead of color");
  command->callback([&action, args] { action = [args] { return run_preview(*args); }; });
}

}  // namespace kipp::cli
