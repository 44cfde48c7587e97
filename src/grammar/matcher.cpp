// The per-sequence matcher: the ready parse stacks, advanced byte by byte; the mask walks the
// vocabulary trie against them, pruning every branch no stack takes. Stacks inside a JSON string
// at a character boundary take the plain-text tokens from precomputed bitsets (by character
// count, so maxLength and the budget are exact) and walk only the trie of the other tokens.
#include <algorithm>
#include <cstring>

#include "grammar/matcher_state.h"

namespace kipp::grammar {

namespace {

constexpr size_t kCompactNodes = size_t{1} << 16;
constexpr size_t kCachedMasks = 64;

void set_bit(std::span<uint32_t> mask, uint32_t id) { mask[id / 32] |= 1u << (id % 32); }

// A string at a character boundary whose next element cannot start with a byte of plain text
// (a closing quote): a plain token then stays inside the string, so the bitsets are exact.
bool plain_text_stays_inside(const Grammar& g, const ParseStacks::Node& n) {
  if (g.elements[n.pos].kind != ElementKind::String || n.sub != kAtCharStart) return false;
  const Element& next = g.elements[n.pos + 1];
  if (next.kind != ElementKind::Bytes) return false;
  const ByteSet& set = g.byte_sets[next.arg];
  for (int b = 0x20; b < 256; ++b)
    if (b != '"' && b != '\\' && byte_set_has(set, static_cast<uint8_t>(b))) return false;
  return true;
}

bool budget_allows(uint32_t min_after, uint32_t token_budget) {
  return token_budget != UINT32_MAX ? token_budget >= 1 && min_after <= token_budget - 1 : min_after != kNoCompletion;
}

}  // namespace

Matcher::State::State(GrammarPtr g, std::shared_ptr<const TokenVocabulary> v)
    : grammar(std::move(g)), vocabulary(std::move(v)), stacks(*grammar) {
  stacks.initial(ready);
}

bool Matcher::State::accepting() const { return !ready.empty() && ready.front() == kEmptyStack; }

Status Matcher::State::advance_bytes(std::string_view bytes) {
  const ParseStacks::Mark mark = stacks.mark();
  std::vector<uint32_t> current = ready, next;
  for (size_t i = 0; i < bytes.size(); ++i) {
    stacks.advance(current, static_cast<uint8_t>(bytes[i]), next);
    if (next.empty()) {
      stacks.rollback(mark);
      return make_error("the grammar does not allow byte " + std::to_string(static_cast<uint8_t>(bytes[i])) +
                        " at offset " + std::to_string(i) + " of '" + std::string(bytes) + "'");
    }
    current.swap(next);
  }
  ready = std::move(current);
  if (stacks.node_count() > kCompactNodes) {
    stacks.compact(ready);
    mask_cache.clear();  // keyed by node ids, which compaction renumbers
  }
  return ok_status();
}

uint32_t Matcher::State::set_id(const std::vector<uint32_t>& stacks_set) {
  const auto [it, added] = set_ids.try_emplace(stacks_set, static_cast<uint32_t>(sets.size()));
  if (added) sets.push_back({stacks_set, stacks.min_bytes(stacks_set), stacks.first_bytes(stacks_set)});
  return it->second;
}

// Within one mask, the same stacks meet the same byte again and again (a repetition returns to
// the stacks it started from), so each (set, byte) step is computed once.
uint32_t Matcher::State::step(uint32_t from, uint8_t b) {
  const uint64_t key = uint64_t{from} << 8 | b;
  if (const auto it = steps.find(key); it != steps.end()) return it->second;
  const std::vector<uint32_t> in = sets[from].stacks;
  stacks.advance(in, b, scratch);
  const uint32_t to = scratch.empty() ? kNoSet : set_id(scratch);
  steps.emplace(key, to);
  return to;
}

void Matcher::State::walk(const TokenTrie& trie, uint32_t node, uint32_t from, std::span<uint32_t> mask,
                          uint32_t token_budget) {
  const ByteSet filter = sets[from].first_bytes;
  const TokenTrie::Node& parent = trie.nodes[node];
  for (uint32_t c = parent.first_child; c < parent.first_child + parent.child_count; ++c) {
    const TokenTrie::Node& child = trie.nodes[c];
    if (!byte_set_has(filter, child.byte)) continue;
    const uint32_t next = step(from, child.byte);
    if (next == kNoSet) continue;
    if (child.token_count != 0) {
      const uint32_t after = sets[next].min_bytes;
      if (budget_allows(after, token_budget)) {
        max_after_ = std::max(max_after_, after);
        for (uint32_t t = child.first_token; t < child.first_token + child.token_count; ++t)
          set_bit(mask, trie.tokens[t]);
      } else if (after != kNoCompletion) {
        budget_bound_ = true;
      }
    }
    if (child.child_count != 0) walk(trie, c, next, mask, token_budget);
  }
}

void Matcher::State::plain_string_tokens(uint32_t id, std::span<uint32_t> mask, uint32_t token_budget) {
  const TokenVocabulary::Impl& v = vocabulary->impl();
  const ParseStacks::Node& n = stacks.node(id);
  const Element& e = grammar->elements[n.pos];
  const uint32_t rest = saturating_add(grammar->tail_min[n.pos + 1], stacks.node(n.parent).min_bytes);
  const uint32_t room = e.max == kUnbounded ? TokenVocabulary::Impl::kMaxPlainChars : e.max - n.count;
  const uint32_t hi = std::min(room, TokenVocabulary::Impl::kMaxPlainChars);
  for (uint32_t need = 0; need < 4; ++need) {
    uint32_t lo = 1;
    if (token_budget != UINT32_MAX) {
      // After k more characters the shortest completion is need + max(0, min - count - k) + rest.
      const int64_t spare = int64_t{token_budget} - 1 - rest - need;
      lo = spare < 0 ? hi + 1 : static_cast<uint32_t>(std::max<int64_t>(1, int64_t{e.min} - n.count - spare));
      if (lo > 1) budget_bound_ = true;
    }
    if (lo > hi) continue;
    max_after_ = std::max(max_after_, saturating_add(need + (e.min > n.count + lo ? e.min - n.count - lo : 0), rest));
    const uint32_t* upto = v.plain_upto(need, hi);
    const uint32_t* below = v.plain_upto(need, lo - 1);
    for (uint32_t w = 0; w < v.words; ++w) mask[w] |= upto[w] & ~below[w];
  }
}

void Matcher::State::each_token(std::span<uint32_t> mask, uint32_t token_budget) {
  const TokenVocabulary::Impl& v = vocabulary->impl();
  std::vector<uint32_t> current, next;
  for (uint32_t id = 0; id < v.size; ++id) {
    if (v.excluded[id] || v.is_end[id] || v.bytes[id].empty()) continue;
    current = ready;
    for (const char c : v.bytes[id]) {
      stacks.advance(current, static_cast<uint8_t>(c), next);
      current.swap(next);
      if (current.empty()) break;
    }
    if (!current.empty() && budget_allows(stacks.min_bytes(current), token_budget)) set_bit(mask, id);
  }
}

void Matcher::State::fill(std::span<uint32_t> mask, uint32_t token_budget, bool reference) {
  std::fill(mask.begin(), mask.end(), 0u);
  const TokenVocabulary::Impl& v = vocabulary->impl();
  if (accepting())
    for (const uint32_t id : v.end_tokens) set_bit(mask, id);
  if (reference) {
    const ParseStacks::Mark mark = stacks.mark();
    each_token(mask, token_budget);
    stacks.rollback(mark);
    return;
  }
  std::vector<uint32_t> in_string, others;
  for (const uint32_t id : ready) {
    if (id == kEmptyStack) continue;
    (plain_text_stays_inside(*grammar, stacks.node(id)) ? in_string : others).push_back(id);
  }
  const ParseStacks::Mark mark = stacks.mark();
  if (!others.empty()) walk(v.all, 0, set_id(others), mask, token_budget);
  if (!in_string.empty()) {
    for (const uint32_t id : in_string) plain_string_tokens(id, mask, token_budget);
    walk(v.not_plain, 0, set_id(in_string), mask, token_budget);
  }
  // The sets and steps name nodes the rollback removes.
  set_ids.clear();
  sets.clear();
  steps.clear();
  stacks.rollback(mark);
}

Matcher::Matcher(GrammarPtr grammar, std::shared_ptr<const TokenVocabulary> vocabulary)
    : state_(std::make_unique<State>(std::move(grammar), std::move(vocabulary))) {}
Matcher::~Matcher() = default;
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;

void Matcher::State::fill_mask(std::span<uint32_t> mask, uint32_t token_budget) {
  // A state met before (unbounded repetitions and strings come back to the same stacks) reuses
  // its mask when the budget did not cut it then and cannot cut it now.
  if (const auto it = mask_cache.find(ready); it != mask_cache.end()) {
    if (token_budget == UINT32_MAX || (token_budget >= 1 && token_budget - 1 >= it->second.max_after)) {
      std::copy(it->second.mask.begin(), it->second.mask.end(), mask.begin());
      return;
    }
  }
  budget_bound_ = false;
  max_after_ = 0;
  fill(mask, token_budget, false);
  if (!budget_bound_) {
    if (mask_cache.size() >= kCachedMasks) mask_cache.clear();
    mask_cache[ready] = CachedMask{std::vector<uint32_t>(mask.begin(), mask.end()), max_after_};
  }
  // A budget smaller than the shortest completion cannot be kept; the grammar still holds.
  if (token_budget != UINT32_MAX && std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; }))
    fill(mask, UINT32_MAX, false);
}

void Matcher::State::fill_mask_reference(std::span<uint32_t> mask, uint32_t token_budget) {
  fill(mask, token_budget, true);
  if (token_budget != UINT32_MAX && std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; }))
    fill(mask, UINT32_MAX, true);
}

void Matcher::fill_mask(std::span<uint32_t> mask, uint32_t token_budget) {
  if (mask.size() < state_->vocabulary->impl().words) {  // too short for the vocabulary: nothing is allowed
    std::fill(mask.begin(), mask.end(), 0u);
    return;
  }
  state_->fill_mask(mask.first(state_->vocabulary->impl().words), token_budget);
}

uint32_t Matcher::min_bytes_to_accept() const { return state_->stacks.min_bytes(state_->ready); }

Status Matcher::accept(uint32_t token) {
  const TokenVocabulary::Impl& v = state_->vocabulary->impl();
  if (token >= v.size) return make_error("token " + std::to_string(token) + " is outside the vocabulary");
  if (v.is_end[token]) {
    if (!accepting()) return make_error("end token " + std::to_string(token) + " before the grammar is complete");
    return ok_status();
  }
  if (v.excluded[token] || v.bytes[token].empty())
    return make_error("token " + std::to_string(token) + " is never allowed by a grammar");
  return state_->advance_bytes(v.bytes[token]);
}

Status Matcher::accept_bytes(std::string_view bytes) { return state_->advance_bytes(bytes); }

bool Matcher::accepting() const { return state_->accepting(); }

bool Matcher::done() const {
  if (!accepting()) return false;
  const ByteSet next = state_->stacks.first_bytes(state_->ready);
  return (next[0] | next[1] | next[2] | next[3]) == 0;
}

}  // namespace kipp::grammar
