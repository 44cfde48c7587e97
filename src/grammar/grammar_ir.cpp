#include "grammar/grammar_ir.h"

#include <algorithm>
#include <map>
#include <optional>

namespace kipp::grammar {

uint32_t saturating_add(uint32_t a, uint32_t b) {
  const uint64_t sum = uint64_t{a} + b;
  return sum >= kNoCompletion ? kNoCompletion : static_cast<uint32_t>(sum);
}

uint32_t saturating_mul(uint32_t a, uint32_t b) {
  if (a == 0 || b == 0) return 0;
  const uint64_t product = uint64_t{a} * b;
  return product >= kNoCompletion ? kNoCompletion : static_cast<uint32_t>(product);
}

uint32_t GrammarBuilder::new_rule(std::string name) {
  alternatives_.emplace_back();
  names_.push_back(std::move(name));
  return static_cast<uint32_t>(alternatives_.size() - 1);
}

void GrammarBuilder::add_alternative(uint32_t rule, const Sequence& sequence) {
  alternatives_[rule].push_back(sequence);
  elements_ += sequence.size() + 1;
}

GrammarBuilder::Item GrammarBuilder::bytes(const ByteSet& set) {
  sets_.push_back(set);
  return {ElementKind::Bytes, static_cast<uint32_t>(sets_.size() - 1)};
}

GrammarBuilder::Item GrammarBuilder::byte(uint8_t b) {
  ByteSet set{};
  byte_set_add(set, b);
  return bytes(set);
}

void GrammarBuilder::append_literal(Sequence& sequence, std::string_view text) {
  for (const char c : text) sequence.push_back(byte(static_cast<uint8_t>(c)));
}

uint32_t GrammarBuilder::literal_rule(std::string name, std::string_view text) {
  Sequence sequence;
  append_literal(sequence, text);
  return sequence_rule(std::move(name), sequence);
}

uint32_t GrammarBuilder::sequence_rule(std::string name, const Sequence& sequence) {
  const uint32_t rule = new_rule(std::move(name));
  add_alternative(rule, sequence);
  return rule;
}

uint32_t GrammarBuilder::empty_rule() { return new_rule("nothing"); }

namespace {

uint32_t item_min(const GrammarBuilder::Item& item, const std::vector<uint32_t>& rule_min) {
  switch (item.kind) {
    case ElementKind::Bytes: return 1;
    case ElementKind::Ref: return rule_min[item.arg];
    case ElementKind::Repeat: return saturating_mul(item.min, rule_min[item.arg]);
    case ElementKind::String: return item.min;
    case ElementKind::End: return 0;
  }
  return 0;
}

}  // namespace

Expected<GrammarPtr> GrammarBuilder::finish(uint32_t root) {
  if (elements_ > kMaxGrammarElements)
    return make_error("the grammar is too large (" + std::to_string(elements_) + " elements, at most " +
                      std::to_string(kMaxGrammarElements) + ")");
  const size_t n = alternatives_.size();
  std::vector<uint32_t> rule_min(n, kNoCompletion);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = n; r-- > 0;) {
      uint32_t best = kNoCompletion;
      for (const Sequence& sequence : alternatives_[r]) {
        uint32_t sum = 0;
        for (const Item& item : sequence) sum = saturating_add(sum, item_min(item, rule_min));
        best = std::min(best, sum);
      }
      if (best < rule_min[r]) {
        rule_min[r] = best;
        changed = true;
      }
    }
  }
  // Repetitions of something that may match nothing, and left recursion, would make the
  // matcher's expansion loop; both are refused.
  std::vector<std::vector<uint32_t>> leftmost(n);
  for (size_t r = 0; r < n; ++r) {
    for (const Sequence& sequence : alternatives_[r]) {
      for (const Item& item : sequence)
        if (item.kind == ElementKind::Repeat && rule_min[item.arg] == 0 && item.max > 1)
          return make_error("rule '" + names_[r] + "' repeats '" + names_[item.arg] +
                            "', which may match nothing (repeat a non-empty expression)");
      for (const Item& item : sequence) {
        if (item.kind == ElementKind::Ref || item.kind == ElementKind::Repeat) leftmost[r].push_back(item.arg);
        if (item_min(item, rule_min) != 0) break;
      }
    }
  }
  std::vector<uint8_t> mark(n, 0);  // 0 new, 1 on the path, 2 done
  for (size_t start = 0; start < n; ++start) {
    if (mark[start]) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(start), 0}};
    mark[start] = 1;
    while (!path.empty()) {
      auto& [rule, next] = path.back();
      if (next == leftmost[rule].size()) {
        mark[rule] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t child = leftmost[rule][next++];
      if (mark[child] == 1) return make_error("rule '" + names_[child] + "' is left-recursive");
      if (mark[child] == 0) {
        mark[child] = 1;
        path.push_back({child, 0});
      }
    }
  }
  if (rule_min[root] == kNoCompletion) return make_error("the grammar admits no complete output");

  auto grammar = std::make_shared<Grammar>();
  grammar->root = root;
  grammar->rule_names = names_;
  grammar->rule_min = rule_min;
  grammar->rules.resize(n);
  std::map<ByteSet, uint32_t> set_ids;
  for (size_t r = 0; r < n; ++r) {
    // Alternatives that are one byte each become one alternative of their union: fewer stacks.
    std::vector<Sequence> merged;
    std::optional<ByteSet> single;
    for (const Sequence& sequence : alternatives_[r]) {
      if (sequence.size() == 1 && sequence[0].kind == ElementKind::Bytes) {
        if (!single) single = ByteSet{};
        for (int w = 0; w < 4; ++w) (*single)[w] |= sets_[sequence[0].arg][w];
      } else {
        merged.push_back(sequence);
      }
    }
    if (single) {
      sets_.push_back(*single);
      merged.push_back({Item{ElementKind::Bytes, static_cast<uint32_t>(sets_.size() - 1)}});
    }
    for (const Sequence& sequence : merged) {
      grammar->rules[r].push_back(static_cast<uint32_t>(grammar->elements.size()));
      for (const Item& item : sequence) {
        Element element{item.kind, item.arg, item.min, item.max};
        if (item.kind == ElementKind::Bytes) {
          auto [it, added] = set_ids.try_emplace(sets_[item.arg], static_cast<uint32_t>(grammar->byte_sets.size()));
          if (added) grammar->byte_sets.push_back(sets_[item.arg]);
          element.arg = it->second;
        }
        grammar->elements.push_back(element);
      }
      grammar->elements.push_back(Element{});
    }
  }
  grammar->tail_min.assign(grammar->elements.size(), 0);
  for (size_t i = grammar->elements.size(); i-- > 0;) {
    const Element& e = grammar->elements[i];
    if (e.kind == ElementKind::End) continue;
    const uint32_t own = item_min(Item{e.kind, e.arg, e.min, e.max}, rule_min);
    grammar->tail_min[i] = saturating_add(own, grammar->tail_min[i + 1]);
  }
  return GrammarPtr(std::move(grammar));
}

}  // namespace kipp::grammar
