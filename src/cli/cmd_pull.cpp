#include "cli/commands.h"

namespace kipp::cli {

void register_pull(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("pull", "Download a pinned registry checkpoint and convert it");
  auto id = std::make_shared<std::string>();
  command->add_option("ID", *id, "Registry checkpoint, e.g. Qwen/Qwen3-0.6B")->required();
  command->callback([&action] { action = [] { return fail("pull is not implemented yet"); }; });
}

}  // namespace kipp::cli
