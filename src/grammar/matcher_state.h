// Matcher::State, internal: what one sequence's matcher holds, and the reference mask (every
// token stepped through the parse stacks on its own) that the trie walk is held equal to.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/parse_stacks.h"
#include "grammar/vocabulary_impl.h"

namespace kipp::grammar {

struct Matcher::State {
  State(GrammarPtr grammar, std::shared_ptr<const TokenVocabulary> vocabulary);

  GrammarPtr grammar;
  std::shared_ptr<const TokenVocabulary> vocabulary;
  ParseStacks stacks;
  std::vector<uint32_t> ready;  // the ready stacks, sorted
  // While a mask is filled: the stack sets met, by id, and the step from a set by a byte.
  struct StackSet {
    std::vector<uint32_t> stacks;
    uint32_t min_bytes;
    ByteSet first_bytes;
  };
  struct SetHash {
    size_t operator()(const std::vector<uint32_t>& v) const {
      size_t h = v.size();
      for (const uint32_t x : v) h = h * 0x9E3779B97F4A7C15ULL + x;
      return h;
    }
  };
  static constexpr uint32_t kNoSet = UINT32_MAX;
  std::unordered_map<std::vector<uint32_t>, uint32_t, SetHash> set_ids;
  std::vector<StackSet> sets;
  std::unordered_map<uint64_t, uint32_t> steps;
  std::vector<uint32_t> scratch;
  struct CachedMask {
    std::vector<uint32_t> mask;
    uint32_t max_after;  // the longest shortest completion after an allowed token
  };
  std::map<std::vector<uint32_t>, CachedMask> mask_cache;  // by ready stacks

  bool accepting() const;
  Status advance_bytes(std::string_view bytes);
  void fill_mask(std::span<uint32_t> mask, uint32_t token_budget);
  // The same mask, token by token, without the trie or the plain-string bitsets.
  void fill_mask_reference(std::span<uint32_t> mask, uint32_t token_budget);

 private:
  void fill(std::span<uint32_t> mask, uint32_t token_budget, bool reference);
  uint32_t set_id(const std::vector<uint32_t>& stacks_set);
  uint32_t step(uint32_t from, uint8_t b);
  void walk(const TokenTrie& trie, uint32_t node, uint32_t from, std::span<uint32_t> mask, uint32_t token_budget);
  void plain_string_tokens(uint32_t id, std::span<uint32_t> mask, uint32_t token_budget);
  const ClassTokens* class_of(uint32_t rule);
  bool class_repeat_tokens(uint32_t parent, const std::vector<uint32_t>& group, const ClassTokens& tokens,
                           std::span<uint32_t> mask, uint32_t token_budget);
  void each_token(std::span<uint32_t> mask, uint32_t token_budget);

  // By rule: whether it was looked at as a character class, and its tokens when it is one.
  std::vector<bool> class_checked_;
  std::vector<std::shared_ptr<const ClassTokens>> classes_;
  bool budget_bound_ = false;  // the budget left out a token in the mask being filled
  uint32_t max_after_ = 0;
};

}  // namespace kipp::grammar
