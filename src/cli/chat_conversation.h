// The conversation behind `kipp chat`: its messages and one session whose K/V cache holds the
// rendered conversation. Each turn renders the whole conversation, keeps the cached tokens it
// shares with the new rendering (truncating the session where they part: Qwen3 drops earlier
// turns' reasoning) and evaluates only the rest.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "core/status.h"
#include "runtime/engine.h"
#include "runtime/generator.h"

namespace kipp::cli {

struct TurnStats {
  uint32_t reused_tokens = 0;  // of the rendered prompt, found in the cache
  uint32_t prompt_tokens = 0;  // of the rendered prompt, evaluated this turn
  uint32_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  FinishReason finish = FinishReason::Length;
};

class ChatConversation {
 public:
  ChatConversation(Engine& engine, std::unique_ptr<Session> session, ChatFormat format, bool thinking)
      : engine_(engine), session_(std::move(session)), format_(format), thinking_(thinking) {}

  // Adds `user_text` as a user turn and generates the answer, streaming it to `on_text`
  // (returning false stops it; the partial answer is kept). On an error the user turn is
  // dropped again and the conversation is as before.
  Expected<TurnStats> send(const std::string& user_text, const GenerateOptions& options, const TextCallback& on_text);

  // Empties the conversation (the system prompt stays) and the cache.
  void reset();
  // Sets (or, with an empty text, removes) the system prompt and resets.
  void set_system(const std::string& text);
  // Replaces the conversation with `messages` (a leading system message becomes the system
  // prompt) and evaluates it into the cache. On an error nothing changes.
  Status load(std::vector<ChatMessage> messages);
  // The conversation as an OpenAI-style messages array (JSON text, one message per element).
  std::string to_json() const;

  const std::vector<ChatMessage>& messages() const { return messages_; }
  const std::string& system() const { return system_; }
  const Session& session() const { return *session_; }
  const std::optional<TurnStats>& last_turn() const { return last_turn_; }
  ChatFormat format() const { return format_; }
  bool thinking() const { return thinking_; }

 private:
  // All messages, the system prompt first.
  std::vector<ChatMessage> full_conversation() const;
  Expected<std::vector<uint32_t>> render_tokens(std::span<const ChatMessage> messages, bool generation_prompt) const;
  // Truncates the session to the longest prefix it shares with `tokens`, always leaving at
  // least one token of `tokens` to evaluate; returns that prefix's length.
  Expected<uint32_t> keep_common_prefix(std::span<const uint32_t> tokens);
  // ChatML-like formats: evaluates the end of the assistant turn (<|im_end|>\n) so that the
  // next turn's rendering extends the cache.
  void close_assistant_turn();

  Engine& engine_;
  std::unique_ptr<Session> session_;
  ChatFormat format_;
  bool thinking_;
  std::string system_;
  std::vector<ChatMessage> messages_;  // without the system prompt
  std::optional<TurnStats> last_turn_;
};

}  // namespace kipp::cli
