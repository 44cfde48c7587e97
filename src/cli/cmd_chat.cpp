// `kipp chat`: an interactive, streaming conversation with an instruct model. The conversation
// lives in one session's K/V cache (see chat_conversation.h); lines starting with '/' are
// commands, every other line is a user turn. Works the same on piped stdin (no prompt).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "chat/chat_template.h"
#include "cli/backend_flag.h"
#include "cli/chat_conversation.h"
#include "cli/chat_display.h"
#include "cli/chat_input.h"
#include "cli/commands.h"
#include "cli/verify_flag.h"
#include "core/files.h"
#include "runtime/engine.h"
#include "runtime/generator.h"

namespace kipp::cli {
namespace {

constexpr const char* kChatFooter = R"(
Each line is a user turn; the answer streams as it is generated. The model's reasoning
(<think>...</think>) is shown dim on a terminal and as generated otherwise; per the Qwen3
template, earlier turns' reasoning is not kept in the conversation. The conversation stays in
the K/V cache: a turn evaluates only its new tokens.

Commands: /reset, /system TEXT, /save FILE, /load FILE, /stats, /help, /quit.
Ctrl-C stops an answer (the part shown is kept) or clears the line being typed; Ctrl-D quits.
With stdin piped, every line is read as typed (commands too) and no prompt is shown.

Examples:
  kipp chat -m qwen3-0.6b-bf16.gguf
  kipp chat -m qwen3-0.6b-bf16.gguf --no-think --system "Answer in one sentence."
  printf 'Hello\n/stats\n' | kipp chat -m qwen3-0.6b-bf16.gguf --temp 0 --max-tokens 64)";

constexpr const char* kHelp =
    "commands:\n"
    "  /reset        clear the conversation (and the cache); the system prompt stays\n"
    "  /system TEXT  set the system prompt (no TEXT: remove it) and clear the conversation\n"
    "  /save FILE    write the conversation as OpenAI-style messages JSON\n"
    "  /load FILE    replace the conversation with a messages JSON file and evaluate it\n"
    "  /stats        tokens in the context, its capacity, the last turn's tokens and speed\n"
    "  /help         this list\n"
    "  /quit         leave (as Ctrl-D)\n"
    "  //TEXT        send a line that starts with '/'\n"
    "Ctrl-C stops an answer or clears the line; Ctrl-D quits.\n";

constexpr uint32_t kDefaultContext = 8192;

struct ChatArgs {
  std::string model;
  std::string system;
  bool think = false;
  bool no_think = false;
  float temperature = 0.6f;  // Qwen3's recommended sampling
  uint32_t top_k = 20;
  float top_p = 0.95f;
  float min_p = 0.0f;
  float repeat_penalty = 1.0f;
  std::optional<uint64_t> seed;
  uint32_t max_tokens = 4096;
  uint32_t context = 0;  // 0: min(model context, kDefaultContext)
  bool no_verify = false;
  BackendKind backend = BackendKind::Cpu;
};

struct Terminal {
  bool styled = false;  // stdout is a terminal and NO_COLOR is unset
  const char* dim(const char* text) const { return styled ? text : ""; }
};

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

void print_stats(const ChatConversation& chat) {
  const Session& session = chat.session();
  std::printf("context: %u of %u tokens (%zu messages)\n", session.length(), session.capacity(),
              chat.messages().size() + (chat.system().empty() ? 0 : 1));
  const auto& turn = chat.last_turn();
  if (!turn) {
    std::printf("last turn: none\n");
    return;
  }
  const double prefill_rate = turn->prefill_seconds > 0 ? turn->prompt_tokens / turn->prefill_seconds : 0.0;
  const double decode_rate = turn->decode_seconds > 0 ? turn->generated_tokens / turn->decode_seconds : 0.0;
  std::printf("last turn: %u prompt tokens evaluated (%u reused from the cache), %u generated (%s)\n",
              turn->prompt_tokens, turn->reused_tokens, turn->generated_tokens,
              std::string(finish_reason_name(turn->finish)).c_str());
  std::printf("speed: prompt %.1f tokens/s, generation %.1f tokens/s\n", prefill_rate, decode_rate);
}

// One user turn: streams the answer and reports how it ended.
void answer(ChatConversation& chat, const std::string& text, GenerateOptions options, uint32_t turn_index,
            const Terminal& terminal) {
  options.sampling.seed += turn_index;  // each turn its own random stream, reproducible with --seed
  ThinkDisplay display(stdout, terminal.styled);
  clear_interrupt();
  // What is shown is what the conversation keeps: a piece is always displayed, then the flag read.
  auto stats = chat.send(text, options, [&](std::string_view piece) {
    display.push(piece);
    return !interrupted();
  });
  display.finish();
  if (!stats.ok()) {
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(stderr, "kipp: error: %s\n", stats.message().c_str());
    return;
  }
  std::printf("\n");
  switch (stats->finish) {
    case FinishReason::Cancelled:
      std::printf("%s[interrupted]%s\n", terminal.dim("\x1b[2m"), terminal.dim("\x1b[0m"));
      break;
    case FinishReason::Length:
      std::printf("%s[stopped at --max-tokens %u]%s\n", terminal.dim("\x1b[2m"), options.max_tokens,
                  terminal.dim("\x1b[0m"));
      break;
    case FinishReason::ContextFull:
      std::printf("%s[the context is full: /reset, or start with a larger --ctx]%s\n", terminal.dim("\x1b[2m"),
                  terminal.dim("\x1b[0m"));
      break;
    default: break;
  }
  std::fflush(stdout);
  clear_interrupt();
}

// Runs one '/' command; returns false to quit.
bool command(ChatConversation& chat, std::string_view line) {
  const size_t space = line.find_first_of(" \t");
  const std::string_view name = line.substr(0, space);
  const std::string argument(space == std::string_view::npos ? std::string_view() : trim(line.substr(space + 1)));
  if (name == "/quit" || name == "/exit") return false;
  if (name == "/help") {
    std::fputs(kHelp, stdout);
  } else if (name == "/reset") {
    chat.reset();
    std::printf("conversation cleared\n");
  } else if (name == "/system") {
    chat.set_system(argument);
    std::printf(argument.empty() ? "system prompt removed; conversation cleared\n"
                                 : "system prompt set; conversation cleared\n");
  } else if (name == "/save") {
    if (argument.empty()) {
      std::fprintf(stderr, "kipp: error: /save needs a file name\n");
    } else if (Status saved = write_text_file_atomic(argument, chat.to_json()); !saved.ok()) {
      std::fprintf(stderr, "kipp: error: /save %s: %s\n", argument.c_str(), saved.message().c_str());
    } else {
      std::printf("saved %zu messages to %s\n", chat.messages().size() + (chat.system().empty() ? 0 : 1),
                  argument.c_str());
    }
  } else if (name == "/load") {
    if (argument.empty()) {
      std::fprintf(stderr, "kipp: error: /load needs a file name\n");
    } else {
      auto text = read_text_file(argument);
      auto messages = text.ok() ? parse_chat_messages(*text) : Expected<std::vector<ChatMessage>>(text.error());
      Status loaded = messages.ok() ? chat.load(std::move(*messages)) : Status(messages.error());
      if (!loaded.ok()) {
        std::fprintf(stderr, "kipp: error: /load %s: %s\n", argument.c_str(), loaded.message().c_str());
      } else {
        std::printf("loaded %zu messages from %s (%u tokens in the context)\n",
                    chat.messages().size() + (chat.system().empty() ? 0 : 1), argument.c_str(),
                    chat.session().length());
      }
    }
  } else if (name == "/stats") {
    print_stats(chat);
  } else {
    std::printf("unknown command %s: /help lists the commands\n", std::string(name).c_str());
  }
  std::fflush(stdout);
  return true;
}

int run_chat(const ChatArgs& args) {
  EngineOptions engine_options;
  engine_options.backend = args.backend;
  engine_options.verify_content_hash = !args.no_verify;
  auto engine = Engine::open(args.model, engine_options);
  if (!engine.ok()) return fail(engine.message());
  auto format = chat_format_of((*engine)->model());
  if (!format.ok()) return fail(format.message());

  GenerateOptions options;
  options.sampling.temperature = args.temperature;
  options.sampling.top_k = args.top_k;
  options.sampling.top_p = args.top_p;
  options.sampling.min_p = args.min_p;
  options.sampling.repetition_penalty = args.repeat_penalty;
  options.sampling.seed = args.seed ? *args.seed : std::random_device{}();
  options.max_tokens = args.max_tokens;
  if (Status valid = options.sampling.validate((*engine)->vocab_size()); !valid.ok()) return fail(valid.message());
  if (args.max_tokens == 0) return fail("--max-tokens must be at least 1");

  const uint32_t model_context = (*engine)->config().context_length;
  uint32_t context = args.context;
  if (context == 0) context = model_context > 0 ? std::min(model_context, kDefaultContext) : kDefaultContext;
  if (model_context > 0 && context > model_context)
    return fail("--ctx " + std::to_string(context) + " is larger than the model's context length " +
                std::to_string(model_context));
  SessionOptions session_options;
  session_options.capacity = context;
  auto session = (*engine)->create_session(session_options);
  if (!session.ok()) return fail(session.message());

  const bool thinking = !args.no_think;
  ChatConversation chat(**engine, std::move(*session), *format, thinking);
  if (!args.system.empty()) chat.set_system(args.system);

  Terminal terminal;
  terminal.styled = isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr;
  install_interrupt_handler();
  LineReader reader;
  if (reader.interactive()) {
    std::printf(
        "kipp chat: %s (%s, thinking %s, context %u tokens)\n/help lists the commands; Ctrl-C stops an "
        "answer, Ctrl-D quits.\n",
        args.model.c_str(), std::string(chat_format_name(*format)).c_str(), thinking ? "on" : "off", context);
    std::fflush(stdout);
  }

  uint32_t turn_index = 0;
  while (auto line = reader.read(">>> ")) {
    std::string_view text = *line;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (trim(text).empty()) continue;
    if (text.starts_with("/") && !text.starts_with("//")) {
      if (!command(chat, trim(text))) break;
      continue;
    }
    if (text.starts_with("//")) text.remove_prefix(1);
    answer(chat, std::string(text), options, turn_index++, terminal);
  }
  return 0;
}

}  // namespace

void register_chat(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("chat", "Chat with an instruct model (interactive, streaming)");
  command->footer(kChatFooter);
  auto args = std::make_shared<ChatArgs>();
  auto seed = std::make_shared<uint64_t>(0);
  command->add_option("-m,--model", args->model, "Kipp GGUF of an instruct model")->required();
  command->add_option("--system", args->system, "System prompt");
  auto* think = command->add_flag("--think", args->think, "Let the model reason before answering (the default)");
  auto* no_think =
      command->add_flag("--no-think", args->no_think, "Answer without reasoning (Qwen3's empty think block)");
  think->excludes(no_think);
  command->add_option("--temp", args->temperature, "Sampling temperature (0: greedy)")->capture_default_str();
  command->add_option("--top-k", args->top_k, "Keep the k most likely tokens (0: off)")->capture_default_str();
  command->add_option("--top-p", args->top_p, "Nucleus sampling mass, (0, 1]")->capture_default_str();
  command->add_option("--min-p", args->min_p, "Drop tokens below min-p times the best one's probability")
      ->capture_default_str();
  command->add_option("--repeat-penalty", args->repeat_penalty, "Repetition penalty (1: off)")->capture_default_str();
  auto* seed_option = command->add_option("--seed", *seed, "Random seed (default: a random one)");
  command->add_option("--max-tokens", args->max_tokens, "Most tokens one answer may generate")->capture_default_str();
  command->add_option("--ctx", args->context,
                      "Context size in tokens (default: the model's, at most " + std::to_string(kDefaultContext) + ")");
  add_backend_option(*command, args->backend);
  add_no_verify_flag(*command, args->no_verify);
  command->callback([&action, args, seed, seed_option] {
    ChatArgs chosen = *args;
    if (seed_option->count() > 0) chosen.seed = *seed;
    action = [chosen] { return run_chat(chosen); };
  });
}

}  // namespace kipp::cli
