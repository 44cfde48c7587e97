#include "cli/chat_conversation.h"
#include "cli/chat_display.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kipp::cli {

namespace {

// The system prompt (if any) followed by the messages: what the template renders.
std::vector<ChatMessage> with_system(const std::string& system, std::span<const ChatMessage> messages) {
  std::vector<ChatMessage> all;
  all.reserve(messages.size() + 1);
  if (!system.empty()) all.push_back(ChatMessage{"system", system, std::nullopt, {}});
  all.insert(all.end(), messages.begin(), messages.end());
  return all;
}

}  // namespace

std::vector<ChatMessage> ChatConversation::full_conversation() const { return with_system(system_, messages_); }

Expected<std::vector<uint32_t>> ChatConversation::render_tokens(std::span<const ChatMessage> messages,
                                                                bool generation_prompt) const {
  ChatOptions options;
  options.add_generation_prompt = generation_prompt;
  options.enable_thinking = thinking_;
  KIPP_ASSIGN_OR_RETURN(std::string text, render_chat(format_, messages, options));
  return engine_.tokenize(text);
}

Expected<uint32_t> ChatConversation::keep_common_prefix(std::span<const uint32_t> tokens) {
  const auto cached = session_->tokens();
  const size_t limit = std::min(cached.size(), tokens.size());
  size_t common = 0;
  while (common < limit && cached[common] == tokens[common]) ++common;
  // Something must be evaluated to have the logits of the last position.
  if (common == tokens.size() && common > 0) --common;
  if (common < cached.size()) KIPP_RETURN_IF_ERROR(session_->truncate(static_cast<uint32_t>(common)));
  return static_cast<uint32_t>(common);
}

void ChatConversation::close_assistant_turn() {
  if (format_ != ChatFormat::Qwen3 && format_ != ChatFormat::ChatML) return;
  auto closing = engine_.tokenize("<|im_end|>\n");
  if (!closing.ok() || closing->empty()) return;
  std::span<const uint32_t> rest(*closing);
  const auto cached = session_->tokens();
  if (!cached.empty() && cached.back() == rest.front()) rest = rest.subspan(1);  // the stop token is in already
  if (rest.empty() || session_->length() + rest.size() > session_->capacity()) return;
  // Only the cache matters here (no logits). A failure leaves the session unchanged; the next
  // turn's prefix check copes either way.
  (void)session_->eval(rest, 0, nullptr);
}

Expected<TurnStats> ChatConversation::send(const std::string& user_text, const GenerateOptions& options,
                                           const TextCallback& on_text) {
  messages_.push_back(ChatMessage{"user", user_text, std::nullopt, {}});
  auto fail_turn = [&](const std::string& message) -> Expected<TurnStats> {
    messages_.pop_back();
    return make_error(message);
  };
  auto tokens = render_tokens(full_conversation(), true);
  if (!tokens.ok()) return fail_turn(tokens.message());
  if (tokens->size() >= session_->capacity())
    return fail_turn("the conversation is " + std::to_string(tokens->size()) + " tokens, which leaves no room in the " +
                     std::to_string(session_->capacity()) + "-token context (/reset, or a larger --ctx)");
  auto common = keep_common_prefix(*tokens);
  if (!common.ok()) return fail_turn(common.message());

  // The generator's text is exactly what went to the callback (a cancelled answer included).
  auto result = generate(engine_, *session_, std::span<const uint32_t>(*tokens).subspan(*common), options, on_text);
  if (!result.ok()) return fail_turn(result.message());
  SplitAnswer split = split_answer(result->text);
  messages_.push_back(ChatMessage{"assistant", std::move(split.content), std::move(split.reasoning), {}});
  close_assistant_turn();

  TurnStats stats;
  stats.reused_tokens = *common;
  stats.prompt_tokens = static_cast<uint32_t>(tokens->size()) - *common;
  stats.generated_tokens = result->stats.generated_tokens;
  stats.prefill_seconds = result->stats.prefill_seconds;
  stats.decode_seconds = result->stats.decode_seconds;
  stats.finish = result->finish;
  last_turn_ = stats;
  return stats;
}

void ChatConversation::reset() {
  messages_.clear();
  session_->reset();
  last_turn_.reset();
}

void ChatConversation::set_system(const std::string& text) {
  system_ = text;
  reset();
}

Status ChatConversation::load(std::vector<ChatMessage> messages) {
  std::string system;
  if (!messages.empty() && messages.front().role == "system") {
    system = messages.front().content;
    messages.erase(messages.begin());
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == "system")
      return make_error("message " + std::to_string(i + (system.empty() ? 0 : 1)) +
                        ": a system message is only supported first");
  }
  const std::vector<ChatMessage> all = with_system(system, messages);
  if (messages.empty()) {
    system_ = system;
    reset();
    return ok_status();
  }
  KIPP_ASSIGN_OR_RETURN(std::vector<uint32_t> tokens, render_tokens(all, false));
  if (tokens.size() >= session_->capacity())
    return make_error("the conversation is " + std::to_string(tokens.size()) + " tokens; the context holds " +
                      std::to_string(session_->capacity()) + " (a larger --ctx)");
  KIPP_ASSIGN_OR_RETURN(uint32_t common, keep_common_prefix(tokens));
  const auto rest = std::span<const uint32_t>(tokens).subspan(common);
  if (Status evaluated = session_->eval(rest, 0, nullptr); !evaluated.ok()) {
    session_->reset();  // the old conversation's cache is no longer whole
    messages_.clear();
    last_turn_.reset();
    return make_error(evaluated.message() + " (the conversation was cleared)");
  }
  system_ = std::move(system);
  messages_ = std::move(messages);
  last_turn_.reset();
  return ok_status();
}

std::string ChatConversation::to_json() const {
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  for (const ChatMessage& message : full_conversation()) {
    nlohmann::ordered_json item;
    item["role"] = message.role;
    item["content"] = message.content;
    if (message.reasoning_content) item["reasoning_content"] = *message.reasoning_content;
    array.push_back(std::move(item));
  }
  return array.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace kipp::cli
