// `kipp logits`: one forward pass over a prompt, the logits printed (argmax, top 5) and
// optionally saved as raw float32 for comparison with other implementations.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/backend_flag.h"
#include "cli/commands.h"
#include "cli/escape.h"
#include "cli/token_ids.h"
#include "cli/verify_flag.h"
#include "core/files.h"
#include "runtime/engine.h"

namespace kipp::cli {
namespace {

constexpr const char* kLogitsFooter = R"(
The prompt is evaluated from position 0 in one session on --backend. --prompt is
tokenized with special tokens parsed (<|im_start|> is one token); --ids takes token ids as is.

-o writes the logits as raw little-endian float32, row-major: one row of vocabulary-size
floats for the last position, or one row per position ([n][vocab]) with --all.

Examples:
  kipp logits -m qwen3-0.6b-bf16.gguf --prompt "The capital of France is"
  kipp logits -m qwen3-0.6b-bf16.gguf --ids 9707,1879 --all -o hello.f32)";

constexpr size_t kTopCount = 5;

// A file of float32 values is only portable if it has one byte order.
static_assert(std::endian::native == std::endian::little, "the -o format is little-endian float32");

struct LogitsArgs {
  std::string model;
  std::optional<std::string> prompt;
  std::optional<std::string> ids;
  BackendKind backend = BackendKind::Cpu;
  bool all_positions = false;
  std::optional<std::string> output;
  bool no_verify = false;
};

// The ids `count` highest logits belong to, highest first (the lower id first on a tie).
std::vector<uint32_t> top_ids(std::span<const float> logits, size_t count) {
  std::vector<uint32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0u);
  count = std::min(count, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(count), ids.end(),
                    [&](uint32_t a, uint32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  ids.resize(count);
  return ids;
}

// "id value "text"" for one token of `row`, its text escaped (a token may be partial UTF-8).
std::string describe(const Engine& engine, std::span<const float> row, uint32_t id) {
  auto text = engine.tokenizer().decode(std::span<const uint32_t>(&id, 1));
  char value[32];
  std::snprintf(value, sizeof value, "%.6f", static_cast<double>(row[id]));
  return std::to_string(id) + " " + value + " \"" + (text.ok() ? escape_text(*text) : "?") + "\"";
}

Status write_logits(const std::string& path, std::span<const float> logits) {
  const auto bytes = std::as_bytes(logits);
  return with_context(
      write_file_atomic(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())),
      "-o " + path);
}

int run_logits(const LogitsArgs& args) {
  if (args.prompt.has_value() == args.ids.has_value()) return fail("give exactly one of --prompt and --ids");
  if (args.prompt && args.prompt->empty()) return fail("--prompt is empty: there is nothing to evaluate");
  std::vector<uint32_t> tokens;
  if (args.ids) {
    // Malformed ids are reported before the model is loaded.
    auto parsed = parse_token_ids(*args.ids);
    if (!parsed.ok()) return fail(parsed.message());
    if (parsed->empty()) return fail("--ids: no token ids given");
    tokens = std::move(*parsed);
  }

  EngineOptions options;
  options.backend = args.backend;
  options.verify_content_hash = !args.no_verify;
  auto engine = Engine::open(args.model, options);
  if (!engine.ok()) return fail(engine.message());
  if (args.prompt) {
    auto encoded = (*engine)->tokenize(*args.prompt);
    if (!encoded.ok()) return fail("--prompt: " + encoded.message());
    tokens = std::move(*encoded);
  } else if (Status known = check_token_ids(tokens, (*engine)->vocab_size()); !known.ok()) {
    return fail("--ids: " + known.message());
  }

  const uint32_t count = static_cast<uint32_t>(tokens.size());
  SessionOptions session_options;
  session_options.capacity = count;
  auto session = (*engine)->create_session(session_options);
  if (!session.ok()) return fail(session.message());
  const uint32_t vocab = (*engine)->vocab_size();
  const uint32_t rows = args.all_positions ? count : 1;
  std::vector<float> logits(size_t{rows} * vocab);
  if (Status evaluated = (*session)->eval(tokens, rows, logits.data()); !evaluated.ok())
    return fail(evaluated.message());
  if (args.output) {
    if (Status written = write_logits(*args.output, logits); !written.ok()) return fail(written.message());
  }

  auto row = [&](uint32_t r) { return std::span<const float>(logits).subspan(size_t{r} * vocab, vocab); };
  const auto last = row(rows - 1);
  std::printf("tokens: %u\n", count);
  std::printf("argmax: %s\n", describe(**engine, last, top_ids(last, 1)[0]).c_str());
  std::printf("top %zu (id value text):\n", kTopCount);
  for (uint32_t id : top_ids(last, kTopCount)) std::printf("  %s\n", describe(**engine, last, id).c_str());
  if (args.all_positions) {
    std::printf("argmax per position (position token: id value text):\n");
    for (uint32_t r = 0; r < rows; ++r)
      std::printf("  %u %u: %s\n", r, tokens[r], describe(**engine, row(r), top_ids(row(r), 1)[0]).c_str());
  }
  if (args.output) std::printf("wrote %u x %u float32 to %s\n", rows, vocab, args.output->c_str());
  return 0;
}

}  // namespace

void register_logits(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("logits", "Evaluate a prompt and print (or save) its logits");
  command->footer(kLogitsFooter);
  auto args = std::make_shared<LogitsArgs>();
  auto prompt = std::make_shared<std::string>();
  auto ids = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  command->add_option("-m,--model", args->model, "Kipp GGUF to evaluate")->required();
  auto* prompt_option = command->add_option("--prompt", *prompt, "Text to evaluate (special tokens parsed)");
  auto* ids_option = command->add_option("--ids", *ids, "Token ids to evaluate, separated by commas or spaces");
  prompt_option->excludes(ids_option);
  add_backend_option(*command, args->backend);
  command->add_flag("--all", args->all_positions, "Logits of every position, not only the last");
  auto* output_option = command->add_option("-o,--output", *output, "Write the logits as raw little-endian float32");
  add_no_verify_flag(*command, args->no_verify);
  command->callback([&action, args, prompt, ids, output, prompt_option, ids_option, output_option] {
    LogitsArgs chosen = *args;
    if (prompt_option->count() > 0) chosen.prompt = *prompt;
    if (ids_option->count() > 0) chosen.ids = *ids;
    if (output_option->count() > 0) chosen.output = *output;
    action = [chosen] { return run_logits(chosen); };
  });
}

}  // namespace kipp::cli
