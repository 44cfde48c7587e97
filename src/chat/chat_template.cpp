// Chat formats: names, which one a model uses, and the dispatch to the renderers
// (chat_qwen3.cpp, chat_formats.cpp).
#include "chat/chat_template.h"

#include <array>

#include "chat/chat_render.h"
#include "model/gguf_schema.h"

namespace kipp {
namespace {

constexpr std::array<std::pair<ChatFormat, std::string_view>, 6> kFormats{{
    {ChatFormat::Qwen3, "qwen3"},
    {ChatFormat::ChatML, "chatml"},
    {ChatFormat::Llama2, "llama2"},
    {ChatFormat::Llama3, "llama3"},
    {ChatFormat::Mistral, "mistral"},
    {ChatFormat::Alpaca, "alpaca"},
}};

std::string all_names() {
  std::string names;
  for (const auto& [format, name] : kFormats) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

}  // namespace

std::string_view chat_format_name(ChatFormat format) {
  for (const auto& [f, name] : kFormats) {
    if (f == format) return name;
  }
  return "unknown";
}

Expected<ChatFormat> parse_chat_format(std::string_view name) {
  for (const auto& [format, known] : kFormats) {
    if (known == name) return format;
  }
  return make_error("unknown chat format '" + std::string(name) + "' (expected one of " + all_names() + ")");
}

std::vector<std::string_view> chat_format_names() {
  std::vector<std::string_view> names;
  for (const auto& [format, name] : kFormats) names.push_back(name);
  return names;
}

bool is_qwen3_chat_template(std::string_view chat_template) {
  // The markers of the Qwen3 hybrid-thinking template: ChatML turns, the enable_thinking switch
  // with its empty think block, and the reasoning handling keyed on last_query_index. The
  // Qwen3-*-2507 templates (instruct-only, thinking-only) lack enable_thinking and differ.
  for (std::string_view marker : {"<|im_start|>", "enable_thinking", "<think>\\n\\n</think>\\n\\n", "reasoning_content",
                                  "last_query_index", "<tool_response>"}) {
    if (chat_template.find(marker) == std::string_view::npos) return false;
  }
  return true;
}

Expected<ChatFormat> chat_format_of(const Model& model) {
  if (const GgufValue* recorded = model.gguf().find(gguf_key::kKippChatFormat)) {
    const std::string* name = recorded->as_string();
    if (name == nullptr) return make_error(std::string(gguf_key::kKippChatFormat) + " is not a string");
    return with_context(parse_chat_format(*name), std::string(gguf_key::kKippChatFormat));
  }
  const auto& chat_template = model.tokenizer().chat_template;
  if (model.provenance().variant == Variant::Base || !chat_template || chat_template->empty()) {
    return make_error("base checkpoints have no chat format; use generate");
  }
  if (!is_qwen3_chat_template(*chat_template)) {
    return make_error(
        "the model's tokenizer.chat_template is not the Qwen3 template the native renderer reproduces "
        "(a " +
        std::string(variant_name(model.provenance().variant)) +
        " checkpoint); record a format with `kipp convert --chat-format NAME` (" + all_names() + ")");
  }
  return ChatFormat::Qwen3;
}

Expected<std::string> render_chat(ChatFormat format, std::span<const ChatMessage> messages,
                                  const ChatOptions& options) {
  if (format != ChatFormat::Qwen3 && !options.tools.empty()) {
    return make_error("tools are only supported by the qwen3 chat format, not " +
                      std::string(chat_format_name(format)));
  }
  switch (format) {
    case ChatFormat::Qwen3: return chat_detail::render_qwen3(messages, options);
    case ChatFormat::ChatML: return chat_detail::render_chatml(messages, options);
    case ChatFormat::Llama2: return chat_detail::render_llama2(messages, options);
    case ChatFormat::Llama3: return chat_detail::render_llama3(messages, options);
    case ChatFormat::Mistral: return chat_detail::render_mistral(messages, options);
    case ChatFormat::Alpaca: return chat_detail::render_alpaca(messages, options);
  }
  return make_error("unknown chat format");
}

Expected<ChatRendering> render_chat_spans(ChatFormat format, std::span<const ChatMessage> messages,
                                          const ChatOptions& options) {
  ChatRendering rendering;
  if (format == ChatFormat::Qwen3) {
    KIPP_ASSIGN_OR_RETURN(rendering.text, chat_detail::render_qwen3(messages, options, &rendering.assistant_spans));
    return rendering;
  }
  KIPP_ASSIGN_OR_RETURN(rendering.text, render_chat(format, messages, options));
  ChatOptions open = options;
  open.add_generation_prompt = true;
  ChatOptions closed = options;
  closed.add_generation_prompt = false;
  size_t done = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    KIPP_ASSIGN_OR_RETURN(std::string before, render_chat(format, messages.first(i), open));
    KIPP_ASSIGN_OR_RETURN(std::string through, render_chat(format, messages.first(i + 1), closed));
    if (!rendering.text.starts_with(before) || !rendering.text.starts_with(through) || through.size() < before.size() ||
        before.size() < done) {
      return chat_detail::message_error(i, "the " + std::string(chat_format_name(format)) +
                                               " rendering of this assistant turn is not a continuation of the "
                                               "earlier messages'");
    }
    rendering.assistant_spans.push_back({before.size(), through.size()});
    done = through.size();
  }
  return rendering;
}

}  // namespace kipp
