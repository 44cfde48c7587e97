// A sequence's grammar constraint around its sampler: the allowed next tokens as a mask
// (computed by prepare(), which may run on another thread while the forward pass runs), applied
// to a logits row as -inf before sampling, then the sampled token advances the grammar.
// Shared by `kipp generate` and the server's scheduler.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"
#include "runtime/engine.h"

namespace kipp {

// The engine's vocabulary for grammars: every token's bytes; control tokens and ids the
// tokenizer does not know are never allowed; `end_tokens` end a sequence the grammar accepts.
std::shared_ptr<const grammar::TokenVocabulary> grammar_vocabulary(const Engine& engine,
                                                                   std::vector<uint32_t> end_tokens);

class Constraint {
 public:
  Constraint(grammar::GrammarPtr grammar, std::shared_ptr<const grammar::TokenVocabulary> vocabulary);

  // The mask of the next token, given how many tokens the sequence may still produce.
  void prepare(uint32_t token_budget);
  // Sets every token outside the mask of the last prepare() to -inf (a row of vocab_size floats).
  void apply(std::span<float> logits) const;
  // The sampled token advances the grammar (an error if the mask did not allow it).
  Status accept(uint32_t token);
  // The grammar is complete and nothing may follow: the sequence ends here.
  bool done() const { return matcher_.done(); }
  // What came so far is complete (more may follow): a sequence ending here is whole.
  bool accepting() const { return matcher_.accepting(); }

 private:
  grammar::Matcher matcher_;
  std::vector<uint32_t> mask_;  // one bit per token of the engine's vocabulary
};

}  // namespace kipp
