// The --backend option of the subcommands that run a model, one parser for all of them.
#pragma once

#include <CLI/CLI.hpp>

#include "backend/backend.h"

namespace kipp::cli {

// Adds --backend cpu|cuda to `command`, setting `backend` (default cpu). An unknown name is a
// usage error from CLI11; a backend that cannot start is Engine::open's one-line error.
CLI::Option* add_backend_option(CLI::App& command, BackendKind& backend);

}  // namespace kipp::cli
