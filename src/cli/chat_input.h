// `kipp chat` input: lines from a terminal (libedit: line editing and history) or from piped
// stdin (no prompt), and the Ctrl-C flag shared with the answer stream.
#pragma once

#include <optional>
#include <string>

namespace kipp::cli {

// Installs the SIGINT handler (no SA_RESTART) that sets the interrupt flag instead of exiting.
void install_interrupt_handler();
// Whether Ctrl-C was pressed since the last clear_interrupt().
bool interrupted();
void clear_interrupt();

class LineReader {
 public:
  // Interactive when stdin is a terminal.
  LineReader();
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  bool interactive() const { return interactive_; }
  // The next line without its newline; nullopt at the end of input (Ctrl-D). Ctrl-C at the
  // prompt discards the line being typed and prompts again.
  std::optional<std::string> read(const char* prompt);

 private:
  bool interactive_;
};

}  // namespace kipp::cli
