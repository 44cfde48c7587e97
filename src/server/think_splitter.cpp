#include "server/think_splitter.h"

#include <algorithm>

namespace kipp::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// The length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

size_t trailing_newlines(std::string_view text) {
  size_t n = 0;
  while (n < text.size() && text[text.size() - 1 - n] == '\n') ++n;
  return n;
}

}  // namespace

void ThinkSplitter::emit(std::string_view text, Output& out) {
  if (skip_newlines_) {
    const size_t first = text.find_first_not_of('\n');
    if (first == std::string_view::npos) return;
    text.remove_prefix(first);
    skip_newlines_ = false;
  }
  (state_ == State::Reasoning ? out.reasoning : out.content).append(text);
}

ThinkSplitter::Output ThinkSplitter::push(std::string_view text) {
  Output out;
  held_.append(text);
  if (state_ == State::Start) {
    // Only whitespace may precede the opening tag.
    const size_t first = held_.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return out;
    const std::string_view rest = std::string_view(held_).substr(first);
    if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return out;  // undecided
    if (rest.substr(0, kOpen.size()) == kOpen) {
      held_.erase(0, first + kOpen.size());
      state_ = State::Reasoning;
      skip_newlines_ = true;
    } else {
      state_ = State::Content;
    }
  }
  if (state_ == State::Reasoning) {
    const size_t at = held_.find(kClose);
    if (at != std::string::npos) {
      emit(std::string_view(held_).substr(0, at - trailing_newlines(std::string_view(held_).substr(0, at))), out);
      held_.erase(0, at + kClose.size());
      state_ = State::Content;
      skip_newlines_ = true;
    } else {
      // Hold back a possible start of </think> and the newlines that may precede it.
      size_t keep = partial_tag_suffix(held_, kClose);
      keep += trailing_newlines(std::string_view(held_).substr(0, held_.size() - keep));
      emit(std::string_view(held_).substr(0, held_.size() - keep), out);
      held_.erase(0, held_.size() - keep);
      return out;
    }
  }
  emit(held_, out);
  held_.clear();
  return out;
}

ThinkSplitter::Output ThinkSplitter::finish() {
  Output out;
  if (state_ == State::Start) state_ = State::Content;
  emit(held_, out);
  held_.clear();
  return out;
}

}  // namespace kipp::server
