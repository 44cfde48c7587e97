// `kipp render`: a conversation (OpenAI-style messages JSON) rendered into the prompt text the
// model's chat format makes, printed exactly (no newline added).
#include <cstdio>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/input_files.h"
#include "cli/verify_flag.h"
#include "model/model.h"

namespace kipp::cli {
namespace {

struct RenderArgs {
  std::string model;
  std::string messages;
  std::string tools;
  std::string format;  // overrides the model's format
  bool think = false;
  bool no_think = false;
  bool no_generation_prompt = false;
  bool no_verify = false;
};

int run_render(const RenderArgs& args) {
  auto text = read_file_or_stdin(args.messages);
  if (!text.ok()) return fail(text.message());
  auto messages = parse_chat_messages(*text);
  if (!messages.ok()) return fail(args.messages + ": " + messages.message());
  ChatOptions options;
  options.add_generation_prompt = !args.no_generation_prompt;
  options.enable_thinking = !args.no_think;
  if (!args.tools.empty()) {
    auto tools_text = read_file_or_stdin(args.tools);
    if (!tools_text.ok()) return fail(tools_text.message());
    auto tools = parse_chat_tools(*tools_text);
    if (!tools.ok()) return fail(args.tools + ": " + tools.message());
    options.tools = std::move(*tools);
  }

  auto model = Model::open(args.model, LoadOptions{.verify_content_hash = !args.no_verify});
  if (!model.ok()) return fail(model.message());
  auto format = args.format.empty() ? chat_format_of(*model) : parse_chat_format(args.format);
  if (!format.ok()) return fail(args.model + ": " + format.message());
  if ((args.think || args.no_think) && *format != ChatFormat::Qwen3) {
    return fail("--think/--no-think apply to the qwen3 chat format, not " + std::string(chat_format_name(*format)));
  }
  auto prompt = render_chat(*format, *messages, options);
  if (!prompt.ok()) return fail(args.messages + ": " + prompt.message());
  if (std::fwrite(prompt->data(), 1, prompt->size(), stdout) != prompt->size() || std::fflush(stdout) != 0) {
    return fail("cannot write to standard output");
  }
  return 0;
}

}  // namespace

void register_render(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("render", "Render a conversation into the model's chat prompt text");
  auto args = std::make_shared<RenderArgs>();
  command->add_option("-m,--model", args->model, "Kipp GGUF whose chat format to use")->required();
  command
      ->add_option("--messages", args->messages,
                   "JSON file with an OpenAI-style messages array ('-' for standard input)")
      ->required();
  command->add_option("--tools", args->tools, "JSON file with a tools array (qwen3 format only)");
  std::vector<std::string> format_names;
  for (std::string_view name : chat_format_names()) format_names.emplace_back(name);
  command->add_option("--chat-format", args->format, "Render with this format instead of the model's")
      ->check(CLI::IsMember(format_names));
  auto* think = command->add_flag("--think", args->think, "Qwen3: let the model think (the default)");
  auto* no_think = command->add_flag("--no-think", args->no_think, "Qwen3: enable_thinking=false (empty think block)");
  think->excludes(no_think);
  command->add_flag("--no-generation-prompt", args->no_generation_prompt,
                    "Do not end with the assistant turn's opening (e.g. to render a finished conversation)");
  add_no_verify_flag(*command, args->no_verify);
  command->callback([&action, args] { action = [args] { return run_render(*args); }; });
}

}  // namespace kipp::cli
