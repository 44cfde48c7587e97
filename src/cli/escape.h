// Showing arbitrary bytes (token texts, which may be partial UTF-8) on one terminal line.
#pragma once

#include <string>

namespace kipp::cli {

// Bytes as a C-style literal body: printable ASCII as is, \n \r \t \\ \", the rest \xNN.
std::string escape_bytes(const std::string& bytes);

// The same, except that valid multi-byte UTF-8 sequences stay as they are (readable text).
std::string escape_text(const std::string& bytes);

}  // namespace kipp::cli
