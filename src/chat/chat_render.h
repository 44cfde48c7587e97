// Internal to the chat renderers (chat_template.cpp, chat_qwen3.cpp, chat_formats.cpp).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "core/status.h"

namespace kipp::chat_detail {

// `assistant_spans`, when given, receives each assistant turn's span (see ChatRendering).
Expected<std::string> render_qwen3(std::span<const ChatMessage> messages, const ChatOptions& options,
                                   std::vector<ChatSpan>* assistant_spans = nullptr);
Expected<std::string> render_chatml(std::span<const ChatMessage> messages, const ChatOptions& options);
Expected<std::string> render_llama2(std::span<const ChatMessage> messages, const ChatOptions& options);
Expected<std::string> render_llama3(std::span<const ChatMessage> messages, const ChatOptions& options);
Expected<std::string> render_mistral(std::span<const ChatMessage> messages, const ChatOptions& options);
Expected<std::string> render_alpaca(std::span<const ChatMessage> messages, const ChatOptions& options);

// "messages[i]: <what>" — the one shape of a per-message error.
Error message_error(size_t index, const std::string& what);

}  // namespace kipp::chat_detail
