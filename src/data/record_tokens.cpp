#include "data/record_tokens.h"

#include <algorithm>
#include <span>

namespace kipp::data {
namespace {

Status append_tokens(const TrainingTokenizer& tokenizer, std::string_view text, SpecialTokens special, bool counted,
                     RecordTokens& out) {
  if (text.empty()) return {};
  KIPP_ASSIGN_OR_RETURN(std::vector<uint32_t> ids, tokenizer.tokenizer.encode(text, special));
  out.ids.insert(out.ids.end(), ids.begin(), ids.end());
  out.counts.insert(out.counts.end(), ids.size(), counted ? 1 : 0);
  return {};
}

// A conversation's rendering cut where each assistant turn begins and ends: the text up to the
// turn is the rendering of the earlier messages with the generation prompt, and the turn ends
// where the rendering of the messages up to it ends. Both must be prefixes of the whole
// rendering, or the spans would not be the text the model sees at generation time.
Expected<RecordTokens> tokenize_conversation(const Record& record, const TrainingTokenizer& tokenizer,
                                             const RecordTokenOptions& options) {
  const std::span<const ChatMessage> messages(record.messages);
  ChatOptions closed;
  closed.add_generation_prompt = false;
  KIPP_ASSIGN_OR_RETURN(std::string whole, render_chat(options.chat_format, messages, closed));
  RecordTokens out;
  size_t done = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    ChatOptions open;
    open.add_generation_prompt = true;
    KIPP_ASSIGN_OR_RETURN(std::string before, render_chat(options.chat_format, messages.first(i), open));
    KIPP_ASSIGN_OR_RETURN(std::string through, render_chat(options.chat_format, messages.first(i + 1), closed));
    if (!whole.starts_with(before) || !whole.starts_with(through) || through.size() < before.size() ||
        before.size() < done) {
      return make_error("the " + std::string(chat_format_name(options.chat_format)) + " rendering of message " +
                        std::to_string(i) + " (assistant) is not a continuation of the earlier messages'");
    }
    KIPP_RETURN_IF_ERROR(append_tokens(tokenizer, std::string_view(whole).substr(done, before.size() - done),
                                       SpecialTokens::Parse, false, out));
    KIPP_RETURN_IF_ERROR(append_tokens(tokenizer,
                                       std::string_view(whole).substr(before.size(), through.size() - before.size()),
                                       SpecialTokens::Parse, true, out));
    done = through.size();
  }
  KIPP_RETURN_IF_ERROR(
      append_tokens(tokenizer, std::string_view(whole).substr(done), SpecialTokens::Parse, false, out));
  // The end token separates packed conversations; the assistant's end-of-turn marker is what
  // the model learns to stop on, so the separator itself carries no loss.
  out.ids.push_back(tokenizer.eos_id);
  out.counts.push_back(0);
  out.rendered = std::move(whole);
  return out;
}

}  // namespace

bool RecordTokens::any_counted() const {
  return std::any_of(counts.begin(), counts.end(), [](uint8_t c) { return c != 0; });
}

Expected<RecordTokens> tokenize_record(const Record& record, const TrainingTokenizer& tokenizer,
                                       const RecordTokenOptions& options) {
  if (record.is_conversation()) return tokenize_conversation(record, tokenizer, options);
  RecordTokens out;
  // Documents are untrusted text: "<|im_start|>" in a web page is not a control token.
  KIPP_RETURN_IF_ERROR(append_tokens(tokenizer, record.text, SpecialTokens::PlainText, true, out));
  if (record.ends_document) {
    out.ids.push_back(tokenizer.eos_id);
    out.counts.push_back(1);
  }
  out.rendered = record.text;
  return out;
}

}  // namespace kipp::data
