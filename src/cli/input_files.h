// Input named on the command line: a file, or standard input when the name is "-".
#pragma once

#include <optional>
#include <string>

#include "core/status.h"

namespace kipp::cli {

// The whole of `path` (read as bytes), or of standard input when `path` is "-".
Expected<std::string> read_file_or_stdin(const std::string& path);

// The text of a --text option when given, else the contents of the --file one.
Expected<std::string> text_or_file(const std::optional<std::string>& text, const std::optional<std::string>& file);

}  // namespace kipp::cli
