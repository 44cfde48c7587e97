#include "runtime/constraint.h"

#include <limits>
#include <string>
#include <utility>

namespace kipp {

std::shared_ptr<const grammar::TokenVocabulary> grammar_vocabulary(const Engine& engine,
                                                                   std::vector<uint32_t> end_tokens) {
  const Tokenizer& tokenizer = engine.tokenizer();
  const uint32_t vocab = engine.vocab_size();
  std::vector<std::string> bytes(vocab);
  std::vector<bool> excluded(vocab, true);
  for (uint32_t id = 0; id < vocab; ++id) {
    if (id >= tokenizer.vocab_size() || tokenizer.is_special_token(id)) continue;
    auto piece = tokenizer.token_to_bytes(id);
    if (!piece.ok() || piece->empty()) continue;
    bytes[id] = std::move(*piece);
    excluded[id] = false;
  }
  return grammar::TokenVocabulary::build(std::move(bytes), std::move(excluded), std::move(end_tokens));
}

Constraint::Constraint(grammar::GrammarPtr grammar, std::shared_ptr<const grammar::TokenVocabulary> vocabulary)
    : matcher_(std::move(grammar), vocabulary), mask_((vocabulary->size() + 31) / 32) {}

void Constraint::prepare(uint32_t token_budget) { matcher_.fill_mask(mask_, token_budget); }

void Constraint::apply(std::span<float> logits) const {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (size_t word = 0; word < mask_.size(); ++word) {
    const uint32_t bits = mask_[word];
    if (bits == UINT32_MAX) continue;
    const size_t first = word * 32;
    for (size_t bit = 0; bit < 32 && first + bit < logits.size(); ++bit)
      if (!(bits >> bit & 1u)) logits[first + bit] = kMasked;
  }
}

Status Constraint::accept(uint32_t token) { return matcher_.accept(token); }

}  // namespace kipp
