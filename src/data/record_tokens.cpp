#include "data/record_tokens.h"

#include <algorithm>

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

// A conversation is rendered once; the assistant spans of that rendering carry loss. Each span
// and each piece of context between spans is tokenized on its own, so no token straddles a span
// boundary and the mask is exact by construction. A span begins right after the turn header's
// newline and (ChatML, Qwen3) ends after "<|im_end|>\n", just before a special token, so the ids
// are the whole rendering's own tokenization unless a turn's text begins with whitespace.
Expected<RecordTokens> tokenize_conversation(const Record& record, const TrainingTokenizer& tokenizer,
                                             const RecordTokenOptions& options) {
  ChatOptions closed;
  closed.add_generation_prompt = false;
  closed.tools = record.tools;
  KIPP_ASSIGN_OR_RETURN(ChatRendering rendering, render_chat_spans(options.chat_format, record.messages, closed));
  const std::string_view whole = rendering.text;
  RecordTokens out;
  size_t done = 0;
  for (const ChatSpan& span : rendering.assistant_spans) {
    KIPP_RETURN_IF_ERROR(
        append_tokens(tokenizer, whole.substr(done, span.begin - done), SpecialTokens::Parse, false, out));
    KIPP_RETURN_IF_ERROR(
        append_tokens(tokenizer, whole.substr(span.begin, span.end - span.begin), SpecialTokens::Parse, true, out));
    done = span.end;
  }
  KIPP_RETURN_IF_ERROR(append_tokens(tokenizer, whole.substr(done), SpecialTokens::Parse, false, out));
  // The end token separates packed conversations; the assistant's end-of-turn marker is what
  // the model learns to stop on, so the separator itself carries no loss.
  out.ids.push_back(tokenizer.eos_id);
  out.counts.push_back(0);
  out.rendered = std::move(rendering.text);
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
