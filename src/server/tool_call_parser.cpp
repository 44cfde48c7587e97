#include "server/tool_call_parser.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kipp::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kSpace = " \t\r\n";

// The length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

size_t trailing_space(std::string_view text) {
  const size_t last = text.find_last_not_of(kSpace);
  return last == std::string_view::npos ? text.size() : text.size() - 1 - last;
}

}  // namespace

ToolCallParser::ToolCallParser(Options options)
    : options_(std::move(options)), rng_(options_.id_seed ? *options_.id_seed : std::random_device{}()) {}

std::string ToolCallParser::make_id() {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng_() % kAlphabet.size()];
  return id;
}

std::optional<ToolCallParser::Call> ToolCallParser::parse_call(std::string_view body) const {
  // Ordered: an object argument keeps the model's key order when it is written compactly.
  const auto json = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object() || json.size() != 2) return std::nullopt;
  const auto name = json.find("name");
  const auto arguments = json.find("arguments");
  if (name == json.end() || arguments == json.end() || !name->is_string()) return std::nullopt;
  Call call;
  call.name = name->get<std::string>();
  if (call.name.empty()) return std::nullopt;
  if (!options_.allowed_names.empty() && std::find(options_.allowed_names.begin(), options_.allowed_names.end(),
                                                   call.name) == options_.allowed_names.end()) {
    return std::nullopt;
  }
  if (arguments->is_string()) {
    call.arguments = arguments->get<std::string>();
  } else if (arguments->is_object()) {
    call.arguments = arguments->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  } else {
    return std::nullopt;
  }
  return call;
}

void ToolCallParser::close_block(std::string_view body, Output& out) {
  std::optional<Call> call;
  if (calls_ < options_.max_calls) call = parse_call(body);
  if (!call) {
    out.content += pending_space_;
    out.content += kOpen;
    out.content += body;
    out.content += kClose;
    pending_space_.clear();
    return;
  }
  call->index = calls_++;
  call->id = make_id();
  out.calls.push_back(std::move(*call));
  pending_space_.clear();
  skip_space_ = true;
  if (calls_ == options_.max_calls) {
    state_ = State::Stopped;
    held_.clear();
  }
}

void ToolCallParser::scan(Output& out) {
  while (true) {
    if (state_ == State::Stopped) return;
    if (state_ == State::Block) {
      const size_t at = held_.find(kClose, searched_);
      if (at == std::string::npos) {
        searched_ = held_.size() - partial_tag_suffix(held_, kClose);
        return;
      }
      const std::string body = held_.substr(0, at);
      held_.erase(0, at + kClose.size());
      state_ = State::Text;
      close_block(body, out);
      continue;
    }
    if (skip_space_) {
      const size_t first = held_.find_first_not_of(kSpace);
      held_.erase(0, first == std::string::npos ? held_.size() : first);
      if (held_.empty()) return;
      skip_space_ = false;
    }
    const size_t at = held_.find(kOpen);
    if (at == std::string::npos) {
      // Hold back a possible start of the tag and the whitespace that would go with the block.
      size_t keep = partial_tag_suffix(held_, kOpen);
      keep += trailing_space(std::string_view(held_).substr(0, held_.size() - keep));
      out.content.append(held_, 0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return;
    }
    const size_t space = trailing_space(std::string_view(held_).substr(0, at));
    out.content.append(held_, 0, at - space);
    pending_space_.assign(held_, at - space, space);
    held_.erase(0, at + kOpen.size());
    state_ = State::Block;
    searched_ = 0;
  }
}

ToolCallParser::Output ToolCallParser::push(std::string_view text) {
  Output out;
  if (state_ == State::Stopped) return out;
  held_.append(text);
  scan(out);
  return out;
}

ToolCallParser::Output ToolCallParser::finish() {
  Output out;
  if (state_ == State::Block) {
    out.content += pending_space_;
    out.content += kOpen;
    pending_space_.clear();
    state_ = State::Text;
  }
  if (state_ == State::Text) out.content += held_;
  held_.clear();
  return out;
}

}  // namespace kipp::server
