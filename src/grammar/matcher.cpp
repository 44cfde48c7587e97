// The per-sequence matcher: the ready parse stacks, advanced byte by byte; the mask walks the
// vocabulary trie against them, pruning every branch no stack takes. Stacks inside a JSON string
// at a character boundary take the plain-text tokens from precomputed bitsets (by character
// count, so maxLength and the budget are exact) and walk only the trie of the other tokens; stacks
// at a character boundary of a repeated character class do the same with that class's tokens.
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

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

// A rule whose alternatives are each one to four byte sets, the first byte fixing the length (how
// classes, `.` and single characters compile): a character class.
std::optional<CharClass> char_class_of(const Grammar& g, uint32_t rule) {
  CharClass out;
  std::array<size_t, 256> length{};
  for (const uint32_t start : g.rules[rule]) {
    std::vector<ByteSet> alt;
    uint32_t at = start;
    for (; g.elements[at].kind == ElementKind::Bytes; ++at) alt.push_back(g.byte_sets[g.elements[at].arg]);
    if (g.elements[at].kind != ElementKind::End || alt.empty() || alt.size() > 4) return std::nullopt;
    if (std::any_of(alt.begin(), alt.end(), [](const ByteSet& set) { return set == ByteSet{}; })) return std::nullopt;
    for (int b = 0; b < 256; ++b) {
      if (!byte_set_has(alt.front(), static_cast<uint8_t>(b))) continue;
      if (length[b] != 0 && length[b] != alt.size()) return std::nullopt;
      length[b] = alt.size();
    }
    out.push_back(std::move(alt));
  }
  if (out.empty()) return std::nullopt;
  return out;
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

const ClassTokens* Matcher::State::class_of(uint32_t rule) {
  if (class_checked_.empty()) {
    class_checked_.assign(grammar->rules.size(), false);
    classes_.resize(grammar->rules.size());
  }
  if (!class_checked_[rule]) {
    class_checked_[rule] = true;
    if (const auto char_class = char_class_of(*grammar, rule))
      classes_[rule] = vocabulary->impl().class_tokens(*char_class);
  }
  return classes_[rule].get();
}

// `group`: the stacks starting each character of the class that the repetition at `parent`
// repeats. A token of class characters can stay inside the repetition, so the lists give it by
// its character count against the repetition's bounds and the budget. It might also leave the
// repetition and go on after it, which changes nothing unless what follows can start with a class
// character: then the shortcut holds only when every listed token is in, else it is not taken.
bool Matcher::State::class_repeat_tokens(uint32_t parent, const std::vector<uint32_t>& group, const ClassTokens& tokens,
                                         std::span<uint32_t> mask, uint32_t token_budget) {
  const ParseStacks::Node p = stacks.node(parent);
  const Element& e = grammar->elements[p.pos];
  const uint32_t rest = saturating_add(grammar->tail_min[p.pos + 1], stacks.node(p.parent).min_bytes);
  const uint32_t unit = grammar->rule_min[e.arg];
  // p.count repetitions are done once the character begun here ends: k characters make p.count + k - 1.
  const uint64_t room = e.max == kUnbounded ? ClassTokens::kMaxChars : uint64_t{e.max} - p.count + 1;
  const uint32_t hi = static_cast<uint32_t>(std::min<uint64_t>(room, ClassTokens::kMaxChars));
  std::array<uint32_t, 4> lo{};
  bool cut = false;
  uint32_t most = 0;
  for (uint32_t need = 0; need < 4; ++need) {
    lo[need] = hi + 1;
    for (uint32_t k = 1; k <= hi; ++k) {
      const uint64_t done = uint64_t{p.count} + k - 1;
      const uint32_t missing = e.min > done ? static_cast<uint32_t>(e.min - done) : 0;
      const uint32_t after = saturating_add(need, saturating_add(saturating_mul(missing, unit), rest));
      if (budget_allows(after, token_budget)) {
        lo[need] = k;
        most = std::max(most, after);
        break;
      }
      if (after != kNoCompletion) cut = true;
    }
  }
  std::vector<uint32_t> follow;
  stacks.ready_from(p.parent, p.pos + 1, follow);
  const ByteSet next = stacks.first_bytes(follow);
  bool overlap = false;
  for (int w = 0; w < 4; ++w) overlap |= (next[w] & tokens.leads[w]) != 0;
  const bool whole =
      hi == ClassTokens::kMaxChars && std::all_of(lo.begin(), lo.end(), [](uint32_t k) { return k == 1; });
  if (overlap && !whole) return false;
  budget_bound_ |= cut;
  max_after_ = std::max(max_after_, most);
  if (whole) {
    for (size_t w = 0; w < mask.size(); ++w) mask[w] |= tokens.any[w];
  } else {
    for (uint32_t need = 0; need < 4; ++need)
      for (uint32_t i = tokens.start[need][lo[need]]; i < tokens.start[need][hi + 1]; ++i) set_bit(mask, tokens.ids[i]);
  }
  walk(tokens.rest, 0, set_id(group), mask, token_budget);
  return true;
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
  // The mask is the union of what each part of the ready stacks allows, so the parts with a
  // shortcut are taken apart and the rest walk the whole trie together.
  std::vector<uint32_t> in_string, others;
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> repeats;  // by the repetition's node
  for (const uint32_t id : ready) {
    if (id == kEmptyStack) continue;
    const ParseStacks::Node& n = stacks.node(id);
    if (plain_text_stays_inside(*grammar, n)) {
      in_string.push_back(id);
      continue;
    }
    const Element& up = grammar->elements[stacks.node(n.parent).pos];
    if (n.parent != kEmptyStack && up.kind == ElementKind::Repeat && class_of(up.arg) != nullptr) {
      const auto& starts = grammar->rules[up.arg];
      if (std::find(starts.begin(), starts.end(), n.pos) != starts.end()) {
        auto it = std::find_if(repeats.begin(), repeats.end(), [&](const auto& r) { return r.first == n.parent; });
        if (it == repeats.end()) it = repeats.insert(repeats.end(), {n.parent, {}});
        it->second.push_back(id);
        continue;
      }
    }
    others.push_back(id);
  }
  const ParseStacks::Mark mark = stacks.mark();
  for (const auto& [parent, group] : repeats) {
    const uint32_t rule = grammar->elements[stacks.node(parent).pos].arg;
    if (group.size() != grammar->rules[rule].size() ||
        !class_repeat_tokens(parent, group, *class_of(rule), mask, token_budget))
      others.insert(others.end(), group.begin(), group.end());
  }
  if (!others.empty()) {
    sort_unique(others);
    walk(v.all, 0, set_id(others), mask, token_budget);
  }
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
