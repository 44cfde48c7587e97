// Records to token ids with a loss mask: plain documents carry loss on every token and end with
// the end token; conversations are rendered with a chat format and only the assistant's turns
// (their text and end-of-turn marker) carry loss.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "core/status.h"
#include "data/records.h"
#include "data/training_tokenizer.h"

namespace kipp::data {

struct RecordTokens {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> counts;  // per id: 1 when the id is a target that carries loss
  std::string rendered;         // the text that was tokenized (a conversation's chat rendering)
  bool any_counted() const;
};

struct RecordTokenOptions {
  ChatFormat chat_format = ChatFormat::ChatML;
};

// Errors describe what is wrong with the record (the caller adds the origin): a conversation
// the chat format cannot render (tools with a format other than qwen3, say), or, for formats
// other than qwen3, one whose turns do not render as prefixes of each other.
Expected<RecordTokens> tokenize_record(const Record& record, const TrainingTokenizer& tokenizer,
                                       const RecordTokenOptions& options);

}  // namespace kipp::data
