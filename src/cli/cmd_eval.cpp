// `kipp eval`: loss and perplexity of a checkpoint or GGUF on a dataset in any supported format.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "train/evaluation.h"

namespace kipp::cli {
namespace {

struct EvalArgs {
  std::string model;
  std::string adapter;
  std::vector<std::string> data;
  std::string format = "auto";
  std::string text_field = "text";
  std::string separator;
  std::string chat_format = "chatml";
  std::string token_dtype = "uint16";
  std::string cache_dir;
  uint32_t seq_len = 256;
  uint32_t batch = 4;
  uint64_t max_windows = 0;
  uint32_t threads = 0;
  bool strict = false;
};

int run_eval(const EvalArgs& args) {
  auto model = train::load_eval_model(args.model, args.adapter);
  if (!model) return fail(model.message());
  train::EvalOptions options;
  options.data.format = args.format;
  options.data.train = args.data;
  options.data.text_field = args.text_field;
  options.data.document_separator = args.separator;
  options.data.chat_format = args.chat_format;
  options.data.token_dtype = args.token_dtype;
  options.data.cache_dir = args.cache_dir;
  options.data.strict = args.strict;
  options.data.shuffle_buffer = 0;
  options.seq_len = args.seq_len;
  options.batch = args.batch;
  options.max_windows = args.max_windows;
  options.threads = args.threads;
  train::EvalEvents events;
  events.cache.on_message = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  events.on_progress = [](uint64_t done, uint64_t total) {
    if (done == total || done % 64 == 0)
      std::fprintf(stderr, "\revaluated %lu/%lu windows", (unsigned long)done, (unsigned long)total);
    if (done == total) std::fprintf(stderr, "\n");
  };
  auto result = train::evaluate_model(*model, options, events);
  if (!result) return fail(result.message());
  std::printf(
      "loss %.4f  perplexity %.3f  (%lu windows of %u tokens, %lu targets; %lu records, %lu malformed, %lu "
      "skipped without assistant tokens)\n",
      result->loss, result->perplexity, (unsigned long)result->windows, args.seq_len, (unsigned long)result->counted,
      (unsigned long)result->data.records, (unsigned long)result->data.malformed,
      (unsigned long)result->data.all_masked);
  return 0;
}

}  // namespace

void register_eval(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("eval", "Loss and perplexity of a model on a dataset");
  command->footer(R"(
MODEL is a checkpoint folder (e.g. RUN_DIR/best) or a GGUF. The data is read, tokenized with
the model's tokenizer and cut into windows exactly as `kipp train` does (the tokenized data is
cached for later runs); conversations count only assistant tokens. --adapter evaluates MODEL
with a LoRA adapter folder (a LoRA run's RUN_DIR/adapter, or PEFT's) folded into its weights,
as `kipp lora merge` would, without writing the merged model.

Examples:
  kipp eval -m runs/tiny/best --data held-out.txt
  kipp eval -m tiny.gguf --data chats.jsonl --chat-format chatml --seq-len 128
  kipp eval -m Qwen3-0.6B-folder --adapter runs/lora/adapter --data held-out.jsonl)");
  auto args = std::make_shared<EvalArgs>();
  command->add_option("-m,--model", args->model, "Checkpoint folder or GGUF")->required();
  command->add_option("--adapter", args->adapter, "LoRA adapter folder to fold into MODEL (PEFT format)");
  command->add_option("--data", args->data, "Files, globs or folders")->required();
  command->add_option("--format", args->format, "auto, text, jsonl, csv, parquet, alpaca, sharegpt, openai or tokens")
      ->capture_default_str();
  command->add_option("--text-field", args->text_field, "JSONL key / CSV or Parquet column")->capture_default_str();
  command->add_option("--separator", args->separator, "Text files: a line equal to this ends a document");
  command->add_option("--chat-format", args->chat_format, "How conversations are rendered")->capture_default_str();
  command->add_option("--token-dtype", args->token_dtype, "tokens format: uint16 or uint32")
      ->check(CLI::IsMember({"uint16", "uint32"}))
      ->capture_default_str();
  command->add_option("--seq-len", args->seq_len, "Tokens per window")->capture_default_str();
  command->add_option("--batch", args->batch, "Windows per forward pass")->capture_default_str();
  command->add_option("--max-windows", args->max_windows, "Evaluate at most this many windows (0: all)");
  command->add_option("--threads", args->threads, "Threads (0: all)");
  command->add_option("--cache-dir", args->cache_dir, "Tokenized-data cache (default ~/.cache/kipp/datasets)");
  command->add_flag("--strict", args->strict, "Fail on the first malformed record instead of skipping it");
  command->callback([&action, args] { action = [args] { return run_eval(*args); }; });
}

}  // namespace kipp::cli
