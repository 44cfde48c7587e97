#include "cli/chat_display.h"

#include <algorithm>

namespace kipp::cli {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
constexpr const char* kDim = "\x1b[2m";
constexpr const char* kNormal = "\x1b[0m";

// The length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

std::string_view trim_newlines(std::string_view text, bool front, bool back) {
  while (front && !text.empty() && text.front() == '\n') text.remove_prefix(1);
  while (back && !text.empty() && text.back() == '\n') text.remove_suffix(1);
  return text;
}

}  // namespace

void ThinkDisplay::emit(std::string_view text) {
  if (skip_newlines_) {
    text = trim_newlines(text, true, false);
    if (text.empty()) return;
    skip_newlines_ = false;
  }
  std::fwrite(text.data(), 1, text.size(), out_);
  last_ = text.back();
}

void ThinkDisplay::push(std::string_view text) {
  if (!styled_) {
    if (!text.empty()) std::fwrite(text.data(), 1, text.size(), out_);
    std::fflush(out_);
    return;
  }
  held_.append(text);
  for (;;) {
    const std::string_view tag = in_think_ ? kClose : kOpen;
    const size_t at = held_.find(tag);
    if (at == std::string::npos) break;
    if (at > 0) emit(std::string_view(held_).substr(0, at));
    held_.erase(0, at + tag.size());
    if (in_think_) {
      if (last_ != '\n') emit("\n");
      std::fputs(kNormal, out_);
    } else {
      std::fputs(kDim, out_);
    }
    in_think_ = !in_think_;
    skip_newlines_ = true;
  }
  const size_t keep = partial_tag_suffix(held_, in_think_ ? kClose : kOpen);
  if (held_.size() > keep) {
    emit(std::string_view(held_).substr(0, held_.size() - keep));
    held_.erase(0, held_.size() - keep);
  }
  std::fflush(out_);
}

void ThinkDisplay::finish() {
  if (styled_) {
    if (!held_.empty()) emit(held_);
    held_.clear();
    if (in_think_) std::fputs(kNormal, out_);
    in_think_ = false;
    skip_newlines_ = false;
  }
  std::fflush(out_);
}

SplitAnswer split_answer(std::string_view text) {
  SplitAnswer split;
  const size_t close = text.find(kClose);
  if (close != std::string_view::npos) {
    std::string_view reasoning = text.substr(0, close);
    if (const size_t open = reasoning.rfind(kOpen); open != std::string_view::npos)
      reasoning.remove_prefix(open + kOpen.size());
    split.reasoning = std::string(trim_newlines(reasoning, true, true));
    split.content = std::string(trim_newlines(text.substr(close + kClose.size()), true, false));
    return split;
  }
  std::string_view rest = trim_newlines(text, true, false);
  if (rest.starts_with(kOpen)) {
    split.reasoning = std::string(trim_newlines(rest.substr(kOpen.size()), true, true));
    return split;
  }
  split.content = std::string(text);
  return split;
}

}  // namespace kipp::cli
