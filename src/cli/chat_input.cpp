#include "cli/chat_input.h"

#include <editline/readline.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace kipp::cli {
namespace {

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the flag is set from a signal handler");

extern "C" void on_interrupt(int) { g_interrupted.store(true); }

}  // namespace

void install_interrupt_handler() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocking read returns EINTR
  sigaction(SIGINT, &action, nullptr);
}

bool interrupted() { return g_interrupted.load(); }
void clear_interrupt() { g_interrupted.store(false); }

LineReader::LineReader() : interactive_(isatty(STDIN_FILENO) != 0) {
  if (interactive_) {
    rl_readline_name = "kipp";  // ~/.editrc sections
    using_history();
  }
}

LineReader::~LineReader() {
  if (interactive_) clear_history();
}

std::optional<std::string> LineReader::read(const char* prompt) {
  if (interactive_) {
    for (;;) {
      clear_interrupt();
      // libedit hands SIGINT on to our handler and returns null: the line is dropped.
      char* line = readline(prompt);
      if (line == nullptr) {
        std::fputc('\n', stdout);
        std::fflush(stdout);
        if (interrupted()) continue;
        return std::nullopt;
      }
      std::string text(line);
      std::free(line);
      if (!text.empty()) add_history(text.c_str());
      return text;
    }
  }
  std::string text;
  for (;;) {
    const int c = std::fgetc(stdin);
    if (c == EOF) {
      if (std::ferror(stdin) && errno == EINTR && !interrupted()) {
        std::clearerr(stdin);
        continue;
      }
      if (text.empty()) return std::nullopt;
      return text;  // a last line without a newline
    }
    if (c == '\n') return text;
    text.push_back(static_cast<char>(c));
  }
}

}  // namespace kipp::cli
