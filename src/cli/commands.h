// Each `kipp` subcommand registers itself on the CLI11 app and returns its exit code through
// `result`. Subcommands only parse arguments and print; the work lives in the library.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace kipp::cli {

// The action of the chosen subcommand, set by its callback; returns the process exit code.
using Action = std::function<int()>;

void register_registry(CLI::App& app, Action& action);
void register_convert(CLI::App& app, Action& action);
void register_inspect(CLI::App& app, Action& action);
void register_pull(CLI::App& app, Action& action);
void register_tokenize(CLI::App& app, Action& action);   // tokenize and detokenize
void register_tokenizer(CLI::App& app, Action& action);  // tokenizer train and tokenizer encode
void register_logits(CLI::App& app, Action& action);
void register_generate(CLI::App& app, Action& action);
void register_render(CLI::App& app, Action& action);
void register_chat(CLI::App& app, Action& action);
void register_train(CLI::App& app, Action& action);
void register_average(CLI::App& app, Action& action);
void register_lora(CLI::App& app, Action& action);  // lora merge
void register_eval(CLI::App& app, Action& action);
void register_plot(CLI::App& app, Action& action);   // kipp plot RUN_DIR: loss curves as SVG
void register_data(CLI::App& app, Action& action);   // data preview
void register_serve(CLI::App& app, Action& action);  // the OpenAI-compatible server
void register_bench(CLI::App& app, Action& action);  // prefill/decode/batch speed against measured limits

// Prints "kipp: error: <message>" on stderr and returns the failure exit code.
int fail(const std::string& message);

}  // namespace kipp::cli
