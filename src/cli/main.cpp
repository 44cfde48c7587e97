#include <cstdio>
#include <exception>
#include <new>

#include "cli/commands.h"

namespace kipp::cli {

int fail(const std::string& message) {
  std::fprintf(stderr, "kipp: error: %s\n", message.c_str());
  return 1;
}

}  // namespace kipp::cli

int main(int argc, char** argv) {
  CLI::App app{"kipp: a local toolkit for Qwen3 dense models (convert, inspect, serve, train)", "kipp"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kipp 0.1.0");
  kipp::cli::Action action;
  kipp::cli::register_registry(app, action);
  kipp::cli::register_pull(app, action);
  kipp::cli::register_convert(app, action);
  kipp::cli::register_inspect(app, action);
  kipp::cli::register_tokenize(app, action);
  kipp::cli::register_tokenizer(app, action);
  kipp::cli::register_logits(app, action);
  kipp::cli::register_generate(app, action);
  kipp::cli::register_render(app, action);
  kipp::cli::register_chat(app, action);
  kipp::cli::register_serve(app, action);
  kipp::cli::register_train(app, action);
  kipp::cli::register_average(app, action);
  kipp::cli::register_lora(app, action);
  kipp::cli::register_eval(app, action);
  kipp::cli::register_plot(app, action);
  kipp::cli::register_data(app, action);
  kipp::cli::register_bench(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  // The library reports errors as values; what still throws (allocating an absurd size a
  // config asked for, a filesystem call) becomes one clear error rather than an abort.
  try {
    return action ? action() : 0;
  } catch (const std::bad_alloc&) {
    return kipp::cli::fail("out of memory (a size in the input or config is too large for this machine)");
  } catch (const std::exception& error) {
    return kipp::cli::fail(error.what());
  }
}
