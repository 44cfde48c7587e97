// Token ids given on the command line (--ids), shared by the subcommands that take them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace kipp::cli {

// "1,2,3", "1 2 3" or "[1, 2, 3]": ids separated by commas and/or whitespace.
Expected<std::vector<uint32_t>> parse_token_ids(const std::string& text);

// Every id names a row of a vocabulary of `vocab_size` tokens.
Status check_token_ids(std::span<const uint32_t> ids, uint32_t vocab_size);

}  // namespace kipp::cli
