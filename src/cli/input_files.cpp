#include "cli/input_files.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace kipp::cli {

Expected<std::string> read_file_or_stdin(const std::string& path) {
  if (path == "-") {
    std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
    if (std::cin.bad()) return make_error("cannot read standard input");
    return text;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return make_error("cannot read " + path);
  return out.str();
}

Expected<std::string> text_or_file(const std::optional<std::string>& text, const std::optional<std::string>& file) {
  if (text) return *text;
  return read_file_or_stdin(file.value_or("-"));
}

}  // namespace kipp::cli
