#include "grammar/parse_stacks.h"

#include <algorithm>
#include <cstring>

namespace kipp::grammar {

namespace {

StringTables make_string_tables() {
  StringTables t{};
  for (auto& row : t.next) row.fill(-1);
  auto range = [&](uint8_t state, int lo, int hi, uint8_t to) {
    for (int b = lo; b <= hi; ++b) t.next[state][b] = static_cast<int8_t>(to);
  };
  range(kAtCharStart, 0x20, 0x7F, kAtCharStart);
  t.next[kAtCharStart]['"'] = -1;
  t.next[kAtCharStart]['\\'] = kEscape;
  range(kAtCharStart, 0xC2, 0xDF, kCont1);
  range(kAtCharStart, 0xE0, 0xE0, kAfterE0);
  range(kAtCharStart, 0xE1, 0xEC, kCont2);
  range(kAtCharStart, 0xED, 0xED, kAfterED);
  range(kAtCharStart, 0xEE, 0xEF, kCont2);
  range(kAtCharStart, 0xF0, 0xF0, kAfterF0);
  range(kAtCharStart, 0xF1, 0xF3, kCont3);
  range(kAtCharStart, 0xF4, 0xF4, kAfterF4);
  range(kCont1, 0x80, 0xBF, kAtCharStart);
  range(kCont2, 0x80, 0xBF, kCont1);
  range(kCont3, 0x80, 0xBF, kCont2);
  range(kAfterE0, 0xA0, 0xBF, kCont1);
  range(kAfterED, 0x80, 0x9F, kCont1);
  range(kAfterF0, 0x90, 0xBF, kCont2);
  range(kAfterF4, 0x80, 0x8F, kCont2);
  for (const char c : std::string_view("\"\\/bfnrt")) t.next[kEscape][static_cast<uint8_t>(c)] = kAtCharStart;
  t.next[kEscape]['u'] = kHex4;
  auto hex = [&](uint8_t state, uint8_t to) {
    range(state, '0', '9', to);
    range(state, 'a', 'f', to);
    range(state, 'A', 'F', to);
  };
  hex(kHex4, kHex3);
  t.next[kHex4]['d'] = kHex3AfterD;
  t.next[kHex4]['D'] = kHex3AfterD;
  range(kHex3AfterD, '0', '7', kHex2);
  hex(kHex3, kHex2);
  hex(kHex2, kHex1);
  hex(kHex1, kAtCharStart);
  const uint8_t pending[kStringStates] = {0, 1, 2, 3, 2, 2, 3, 3, 1, 4, 3, 3, 2, 1};
  for (uint8_t s = 0; s < kStringStates; ++s) {
    t.pending[s] = pending[s];
    for (int b = 0; b < 256; ++b)
      if (t.next[s][b] >= 0) byte_set_add(t.allowed[s], static_cast<uint8_t>(b));
  }
  return t;
}

uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

}  // namespace

const StringTables& string_tables() {
  static const StringTables tables = make_string_tables();
  return tables;
}

void sort_unique(std::vector<uint32_t>& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

ParseStacks::ParseStacks(const Grammar& grammar) : grammar_(&grammar) {
  nodes_.push_back(Node{0, 0, 0, 0, 0});
  rehash(1024);
}

size_t ParseStacks::slot_of(uint32_t pos, uint32_t count, uint8_t sub, uint32_t parent) const {
  const uint64_t key = mix((uint64_t{pos} << 32 | count) ^ mix(uint64_t{parent} << 8 | sub));
  return key & (slots_.size() - 1);
}

void ParseStacks::rehash(size_t slots) {
  slots_.assign(slots, 0);
  slot_of_node_.clear();
  for (uint32_t id = 1; id < nodes_.size(); ++id) {
    const Node& n = nodes_[id];
    size_t s = slot_of(n.pos, n.count, n.sub, n.parent);
    while (slots_[s] != 0) s = (s + 1) & (slots_.size() - 1);
    slots_[s] = id;
    slot_of_node_.push_back(static_cast<uint32_t>(s));
  }
  ++generation_;
}

void ParseStacks::rollback(const Mark& mark) {
  if (mark.generation != generation_) {
    nodes_.resize(mark.nodes);
    rehash(slots_.size());
    return;
  }
  // Linear probing: clearing the slots in reverse order of filling restores the table exactly.
  while (nodes_.size() > mark.nodes) {
    slots_[slot_of_node_.back()] = 0;
    slot_of_node_.pop_back();
    nodes_.pop_back();
  }
}

uint32_t ParseStacks::contribution(uint32_t pos, uint32_t count, uint8_t sub) const {
  const Element& e = grammar_->elements[pos];
  switch (e.kind) {
    case ElementKind::Repeat:
      return saturating_add(saturating_mul(e.min > count ? e.min - count : 0, grammar_->rule_min[e.arg]),
                            grammar_->tail_min[pos + 1]);
    case ElementKind::String:
      return saturating_add(string_tables().pending[sub] + (e.min > count ? e.min - count : 0),
                            grammar_->tail_min[pos + 1]);
    default: return grammar_->tail_min[pos];
  }
}

uint32_t ParseStacks::intern(uint32_t pos, uint32_t count, uint8_t sub, uint32_t parent) {
  size_t s = slot_of(pos, count, sub, parent);
  for (uint32_t id; (id = slots_[s]) != 0; s = (s + 1) & (slots_.size() - 1)) {
    const Node& n = nodes_[id];
    if (n.pos == pos && n.count == count && n.sub == sub && n.parent == parent) return id;
  }
  const uint32_t id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back(
      Node{pos, count, parent, sub, saturating_add(contribution(pos, count, sub), nodes_[parent].min_bytes)});
  slots_[s] = id;
  slot_of_node_.push_back(static_cast<uint32_t>(s));
  if (nodes_.size() * 2 > slots_.size()) rehash(slots_.size() * 2);
  return id;
}

void ParseStacks::settle(uint32_t parent, uint32_t pos, uint32_t count, uint8_t sub, std::vector<uint32_t>& out) {
  const Element& e = grammar_->elements[pos];
  switch (e.kind) {
    case ElementKind::End: {
      if (parent == kEmptyStack) {
        out.push_back(kEmptyStack);
        return;
      }
      const Node p = nodes_[parent];
      settle(p.parent, p.pos, p.count, p.sub, out);
      return;
    }
    case ElementKind::Bytes: out.push_back(intern(pos, 0, 0, parent)); return;
    case ElementKind::Ref: {
      const uint32_t next = pos + 1;
      const uint32_t continuation =
          grammar_->elements[next].kind == ElementKind::End ? parent : intern(next, 0, 0, parent);
      for (const uint32_t alt : grammar_->rules[e.arg]) settle(continuation, alt, 0, 0, out);
      return;
    }
    case ElementKind::Repeat: {
      // Past the minimum, an unbounded repetition's count no longer matters: equal stacks stay equal.
      if (e.max == kUnbounded && count > e.min) count = e.min;
      if (count < e.max) {
        const uint32_t continuation =
            intern(pos, count + 1 > e.min && e.max == kUnbounded ? e.min : count + 1, 0, parent);
        for (const uint32_t alt : grammar_->rules[e.arg]) settle(continuation, alt, 0, 0, out);
      }
      if (count >= e.min) settle(parent, pos + 1, 0, 0, out);
      return;
    }
    case ElementKind::String: {
      if (e.max == kUnbounded && count > e.min) count = e.min;
      if (sub != kAtCharStart || count < e.max) out.push_back(intern(pos, count, sub, parent));
      if (sub == kAtCharStart && count >= e.min) settle(parent, pos + 1, 0, 0, out);
      return;
    }
  }
}

void ParseStacks::initial(std::vector<uint32_t>& out) {
  out.clear();
  for (const uint32_t alt : grammar_->rules[grammar_->root]) settle(kEmptyStack, alt, 0, 0, out);
  sort_unique(out);
}

void ParseStacks::ready_from(uint32_t parent, uint32_t pos, std::vector<uint32_t>& out) {
  out.clear();
  settle(parent, pos, 0, 0, out);
  sort_unique(out);
}

void ParseStacks::advance(const std::vector<uint32_t>& in, uint8_t b, std::vector<uint32_t>& out) {
  out.clear();
  const StringTables& tables = string_tables();
  for (const uint32_t id : in) {
    if (id == kEmptyStack) continue;
    const Node n = nodes_[id];
    const Element& e = grammar_->elements[n.pos];
    if (e.kind == ElementKind::Bytes) {
      if (byte_set_has(grammar_->byte_sets[e.arg], b)) settle(n.parent, n.pos + 1, 0, 0, out);
      continue;
    }
    const int8_t next = tables.next[n.sub][b];
    if (next < 0) continue;
    const uint32_t count = n.sub == kAtCharStart ? n.count + 1 : n.count;
    if (next == kAtCharStart)
      settle(n.parent, n.pos, count, kAtCharStart, out);
    else
      out.push_back(intern(n.pos, count, static_cast<uint8_t>(next), n.parent));
  }
  if (out.size() > 1) sort_unique(out);
}

ByteSet ParseStacks::first_bytes(const std::vector<uint32_t>& in) const {
  ByteSet set{};
  for (const uint32_t id : in) {
    if (id == kEmptyStack) continue;
    const Node& n = nodes_[id];
    const Element& e = grammar_->elements[n.pos];
    const ByteSet& add = e.kind == ElementKind::Bytes ? grammar_->byte_sets[e.arg] : string_tables().allowed[n.sub];
    for (int w = 0; w < 4; ++w) set[w] |= add[w];
  }
  return set;
}

uint32_t ParseStacks::min_bytes(const std::vector<uint32_t>& in) const {
  uint32_t best = kNoCompletion;
  for (const uint32_t id : in) best = std::min(best, nodes_[id].min_bytes);
  return best;
}

void ParseStacks::compact(std::vector<uint32_t>& live) {
  std::vector<std::vector<Node>> chains;
  for (const uint32_t id : live) {
    std::vector<Node> chain;
    for (uint32_t at = id; at != kEmptyStack; at = nodes_[at].parent) chain.push_back(nodes_[at]);
    chains.push_back(std::move(chain));
  }
  nodes_.resize(1);
  rehash(1024);
  for (size_t i = 0; i < live.size(); ++i) {
    uint32_t parent = kEmptyStack;
    for (auto it = chains[i].rbegin(); it != chains[i].rend(); ++it)
      parent = intern(it->pos, it->count, it->sub, parent);
    live[i] = parent;
  }
  sort_unique(live);
}

}  // namespace kipp::grammar
