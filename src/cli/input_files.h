// Input named on the command line: a file, or standard input when the name is "-".
#pragma once

#include <string>

#include "core/status.h"

namespace kipp::cli {

// The whole of `path` (read as bytes), or of standard input when `path` is "-".
Expected<std::string> read_file_or_stdin(const std::string& path);

}  // namespace kipp::cli
