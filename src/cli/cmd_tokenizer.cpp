// `kipp tokenizer train`: learn a byte-level BPE tokenizer (Qwen2 pre-tokenizer) from text
// files and write it as a Hugging Face tokenizer.json (+ tokenizer_config.json beside it);
// `kipp tokenizer encode`: encode text with such a tokenizer.json, no model needed.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/input_files.h"
#include "core/files.h"
#include "data/training_tokenizer.h"
#include "pull/progress.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json_writer.h"

namespace kipp::cli {
namespace {

constexpr const char* kTrainFooter = R"(
The tokenizer splits text exactly as Qwen's does (NFC, the Qwen2 split regex, byte-level
symbols) and learns merges from the 256 bytes up: the most frequent adjacent pair first, ties
to the pair with the smaller token ids. --vocab-size counts everything: 256 bytes + learned
tokens + special tokens. The special tokens (default: <pad> <unk> <bos> <eos> <mask>
<|im_start|> <|im_end|>, then each --special) take the last ids, in that order; where they
appear in the input they are not learned from. Invalid UTF-8 in an input is an error naming
the file and byte offset. tokenizer_config.json is written beside the output.

Examples:
  kipp tokenizer train --input corpus.txt more.txt --vocab-size 32000 -o tok/tokenizer.json
  kipp tokenizer train --input corpus.txt --vocab-size 8192 --special '<|endoftext|>' -o tok/tokenizer.json
  kipp tokenizer train --byte-level -o tiny/tokenizer.json
  kipp tokenizer encode -t tok/tokenizer.json --text "Hello world")";

// Counting bytes, then merges: one line redrawn in place on a terminal, else a line per quarter.
class TrainingProgress {
 public:
  explicit TrainingProgress(std::FILE* stream) : stream_(stream), interactive_(stream_is_terminal(stream)) {}
  ~TrainingProgress() { end_line(); }

  void update(const BpeTrainingProgress& progress) {
    using Phase = BpeTrainingProgress::Phase;
    if (progress.phase != phase_) {
      end_line();
      phase_ = progress.phase;
      start_ = Clock::now();
      last_quarter_ = -1;
    }
    const auto now = Clock::now();
    const bool finished = progress.done >= progress.total;
    const int quarter = progress.total ? static_cast<int>(4 * progress.done / progress.total) : 4;
    if (interactive_ ? (!finished && now - last_draw_ < std::chrono::milliseconds(100)) : quarter <= last_quarter_)
      return;
    last_draw_ = now;
    last_quarter_ = quarter;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double percent = progress.total ? 100.0 * double(progress.done) / double(progress.total) : 100.0;
    char text[200];
    if (progress.phase == Phase::Counting) {
      const double rate = seconds > 0.05 ? double(progress.done) / seconds / 1e6 : 0.0;
      std::snprintf(text, sizeof text, "counting words  %s / %s  %3.0f%%  %.1f MB/s",
                    format_bytes(progress.done).c_str(), format_bytes(progress.total).c_str(), percent, rate);
    } else {
      std::snprintf(text, sizeof text, "learning merges  %llu / %llu  %3.0f%%  %.1f s",
                    static_cast<unsigned long long>(progress.done), static_cast<unsigned long long>(progress.total),
                    percent, seconds);
    }
    if (interactive_) {
      std::fprintf(stream_, "\r%s\x1b[K", text);
      line_open_ = true;
    } else {
      std::fprintf(stream_, "%s\n", text);
    }
    std::fflush(stream_);
  }

  void end_line() {
    if (line_open_) std::fputc('\n', stream_);
    line_open_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::FILE* stream_;
  bool interactive_;
  std::optional<BpeTrainingProgress::Phase> phase_;
  Clock::time_point start_{}, last_draw_{};
  int last_quarter_ = -1;
  bool line_open_ = false;
};

struct TrainArgs {
  std::vector<std::string> inputs;
  uint32_t vocab_size = 0;
  std::vector<std::string> specials;
  bool no_default_specials = false;
  uint64_t min_frequency = 2;
  size_t threads = 0;
  bool byte_level = false;
  bool quiet = false;
  std::string output;
};

std::string config_path_beside(const std::string& output) {
  return (std::filesystem::path(output).parent_path() / "tokenizer_config.json").string();
}

// Fails early (before a long training run) when the output cannot be written.
Status check_writable(const std::string& path) {
  if (std::filesystem::is_directory(path))
    return make_error("-o " + path + " is a directory; name the tokenizer.json to write");
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (!folder.empty() && !std::filesystem::is_directory(folder)) {
    return make_error("cannot write " + path + ": the folder " + folder.string() + " does not exist");
  }
  auto probe = AtomicFile::create(path);  // a temporary beside it, removed again
  if (!probe.ok()) return make_error("cannot write " + path + ": " + probe.message());
  return ok_status();
}

int run_train(const TrainArgs& args) {
  std::vector<std::string> specials = args.no_default_specials ? std::vector<std::string>{} : default_special_tokens();
  specials.insert(specials.end(), args.specials.begin(), args.specials.end());
  const auto started = std::chrono::steady_clock::now();
  Expected<TrainedTokenizer> trained = make_error("unreachable");
  std::string summary;
  if (args.byte_level) {
    if (!args.inputs.empty() || args.vocab_size != 0) return fail("--byte-level takes no --input and no --vocab-size");
    if (Status ok = check_writable(args.output); !ok.ok()) return fail(ok.message());
    trained = byte_level_tokenizer(specials);
    if (!trained.ok()) return fail(trained.message());
  } else {
    if (args.inputs.empty()) return fail("give --input files (or --byte-level for the 256 byte tokens alone)");
    if (args.vocab_size == 0) return fail("give --vocab-size (bytes + learned tokens + special tokens)");
    const BpeMergeOptions merge_options{
        .vocab_size = args.vocab_size, .special_tokens = specials, .min_frequency = args.min_frequency};
    if (Status ok = check_bpe_options(merge_options); !ok.ok()) return fail(ok.message());
    if (Status ok = check_writable(args.output); !ok.ok()) return fail(ok.message());
    std::optional<TrainingProgress> printer;
    if (!args.quiet) printer.emplace(stderr);
    BpeProgressCallback progress;
    if (printer) progress = [&printer](const BpeTrainingProgress& p) { printer->update(p); };
    auto counts = count_words_in_files(args.inputs, {.special_tokens = specials, .threads = args.threads}, progress);
    if (!counts.ok()) {
      if (printer) printer->end_line();
      return fail(counts.message());
    }
    const auto counted = std::chrono::steady_clock::now();
    trained = train_bpe(*counts, merge_options, progress);
    if (printer) printer->end_line();
    if (!trained.ok()) return fail(trained.message());
    char text[320];
    std::snprintf(text, sizeof text, "; %s in %zu files, %llu words (%zu distinct); counting %.1f s, merging %.1f s",
                  format_bytes(counts->bytes).c_str(), args.inputs.size(),
                  static_cast<unsigned long long>(counts->pieces), counts->words.size(),
                  std::chrono::duration<double>(counted - started).count(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - counted).count());
    summary = text;
    if (trained->stopped_early) {
      summary += "; stopped at " + std::to_string(trained->total_size()) +
                 " tokens: no pair left that occurs at least " +
                 std::to_string(std::max<uint64_t>(args.min_frequency, 1)) + " times";
    }
  }
  if (Status ok = write_text_file_atomic(args.output, to_tokenizer_json(*trained)); !ok.ok()) return fail(ok.message());
  const std::string config = config_path_beside(args.output);
  if (Status ok = write_text_file_atomic(config, to_tokenizer_config_json(*trained)); !ok.ok())
    return fail(ok.message());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("wrote %s and %s: %u tokens (256 bytes, %zu learned, %zu special), %zu merges%s; %.1f s\n",
              args.output.c_str(), config.c_str(), trained->total_size(), trained->vocab.size() - 256,
              trained->special_tokens.size(), trained->merges.size(), summary.c_str(), seconds);
  return 0;
}

struct EncodeArgs {
  std::string tokenizer;
  std::optional<std::string> text, file, jsonl;
  bool no_special = false;
};

std::string ids_line(const std::vector<uint32_t>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  return line;
}

int run_encode(const EncodeArgs& args) {
  if (int(args.text.has_value()) + int(args.file.has_value()) + int(args.jsonl.has_value()) != 1) {
    return fail("give exactly one of --text, --file and --jsonl");
  }
  auto loaded = data::load_tokenizer_json(args.tokenizer);
  if (!loaded.ok()) return fail(loaded.message());
  const Tokenizer* tokenizer = &loaded->tokenizer;
  const SpecialTokens special = args.no_special ? SpecialTokens::PlainText : SpecialTokens::Parse;
  if (!args.jsonl) {
    auto text = text_or_file(args.text, args.file);
    if (!text.ok()) return fail(text.message());
    auto ids = tokenizer->encode(*text, special);
    if (!ids.ok()) return fail((args.file ? *args.file : std::string("--text")) + ": " + ids.message());
    std::printf("%s\n", ids_line(*ids).c_str());
    return 0;
  }
  // One JSON string (or object with "text") per line in, one {"ids": [...]} per line out.
  auto read = read_file_or_stdin(*args.jsonl);
  if (!read.ok()) return fail(read.message());
  size_t line_number = 0;
  size_t start = 0;
  while (start < read->size()) {
    size_t end = read->find('\n', start);
    if (end == std::string::npos) end = read->size();
    const std::string line = read->substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (line.empty()) continue;
    const std::string where = *args.jsonl + " line " + std::to_string(line_number);
    const auto json = nlohmann::json::parse(line, nullptr, false);
    std::string text;
    if (json.is_string()) {
      text = json.get<std::string>();
    } else if (json.is_object() && json.contains("text") && json["text"].is_string()) {
      text = json["text"].get<std::string>();
    } else {
      return fail(where + ": expected a JSON string or an object with a \"text\" string");
    }
    auto ids = tokenizer->encode(text, special);
    if (!ids.ok()) return fail(where + ": " + ids.message());
    std::printf("%s\n", nlohmann::json{{"ids", *ids}}.dump().c_str());
  }
  return 0;
}

}  // namespace

void register_tokenizer(CLI::App& app, Action& action) {
  auto* tokenizer =
      app.add_subcommand("tokenizer", "Train a byte-level BPE tokenizer, or encode with a tokenizer.json");
  tokenizer->require_subcommand(1);

  auto* train = tokenizer->add_subcommand("train", "Learn a byte-level BPE tokenizer (Qwen2 pre-tokenizer) from text");
  train->footer(kTrainFooter);
  auto args = std::make_shared<TrainArgs>();
  train->add_option("-i,--input", args->inputs, "UTF-8 text files to learn from")->expected(1, -1);
  train->add_option("--vocab-size", args->vocab_size, "Total tokens: 256 bytes + learned + special");
  train->add_option("--special", args->specials, "Another special token, after the defaults (repeatable)");
  train->add_flag("--no-default-specials", args->no_default_specials,
                  "Leave out <pad> <unk> <bos> <eos> <mask> <|im_start|> <|im_end|>");
  train->add_option("--min-frequency", args->min_frequency, "Merge no pair that occurs fewer times")
      ->capture_default_str();
  train->add_option("--threads", args->threads, "Threads counting words (0: one per core)")->capture_default_str();
  train->add_flag("--byte-level", args->byte_level, "Write the 256 byte tokens and the special tokens, no merges");
  train->add_flag("-q,--quiet", args->quiet, "No progress on stderr");
  train->add_option("-o,--output", args->output, "tokenizer.json to write")->required();
  train->callback([&action, args] { action = [args] { return run_train(*args); }; });

  auto* encode = tokenizer->add_subcommand("encode", "Encode text with a tokenizer.json into token ids");
  auto encode_args = std::make_shared<EncodeArgs>();
  auto text = std::make_shared<std::string>();
  auto file = std::make_shared<std::string>();
  auto jsonl = std::make_shared<std::string>();
  encode
      ->add_option("-t,--tokenizer", encode_args->tokenizer,
                   "tokenizer.json (tokenizer_config.json beside it is read too)")
      ->required();
  auto* text_option = encode->add_option("--text", *text, "The text to encode");
  auto* file_option = encode->add_option("--file", *file, "Encode this file's contents ('-' for standard input)");
  auto* jsonl_option = encode->add_option(
      "--jsonl", *jsonl, "Encode each line (a JSON string or {\"text\": ...}); print {\"ids\": [...]} per line");
  encode->add_flag("--no-special", encode_args->no_special, "Treat special-token text as plain text");
  encode->callback([&action, encode_args, text, file, jsonl, text_option, file_option, jsonl_option] {
    EncodeArgs chosen = *encode_args;
    if (text_option->count() > 0) chosen.text = *text;
    if (file_option->count() > 0) chosen.file = *file;
    if (jsonl_option->count() > 0) chosen.jsonl = *jsonl;
    action = [chosen] { return run_encode(chosen); };
  });
}

}  // namespace kipp::cli
