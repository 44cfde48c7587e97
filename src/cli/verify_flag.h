// The --no-verify flag of the subcommands that open a Kipp GGUF.
#pragma once

#include <CLI/CLI.hpp>

namespace kipp::cli {

// Adds --no-verify (skip re-hashing the tensor data) to `command`, setting `no_verify`.
inline CLI::Option* add_no_verify_flag(CLI::App& command, bool& no_verify) {
  return command.add_flag("--no-verify", no_verify, "Skip re-hashing the tensor data against kipp.content_hash");
}

}  // namespace kipp::cli
