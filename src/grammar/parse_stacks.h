// The matcher's parse state: a set of parse stacks (the grammar may be ambiguous) kept as
// shared, interned frames so that advancing by a byte creates a node or two instead of copying
// stacks, and equal stacks are equal ids (a set of stacks is a sorted vector of ids). A stack in
// a set is always "ready": its top is a byte set or a string character, or it is the empty stack
// (the grammar accepts). Nodes made while probing tokens are rolled back afterwards.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "grammar/grammar_ir.h"

namespace kipp::grammar {

// Inside a JSON string: where the current character stands.
enum StringState : uint8_t {
  kAtCharStart = 0,
  kCont1,
  kCont2,
  kCont3,  // that many UTF-8 continuation bytes (80-BF) to come
  kAfterE0,
  kAfterED,  // 3-byte lead E0 / ED: the next byte is restricted (no overlongs, no surrogates)
  kAfterF0,
  kAfterF4,  // 4-byte lead F0 / F4: the next byte is restricted
  kEscape,   // after a backslash
  kHex4,
  kHex3AfterD,
  kHex3,
  kHex2,
  kHex1,  // \u and its hex digits (no surrogate code units)
  kStringStates
};

struct StringTables {
  std::array<std::array<int8_t, 256>, kStringStates> next;  // -1: the byte is not allowed
  std::array<ByteSet, kStringStates> allowed;
  std::array<uint8_t, kStringStates> pending;  // bytes still needed to finish the character
};
const StringTables& string_tables();

inline constexpr uint32_t kEmptyStack = 0;

class ParseStacks {
 public:
  explicit ParseStacks(const Grammar& grammar);

  struct Node {
    uint32_t pos;
    uint32_t count;
    uint32_t parent;
    uint8_t sub;
    uint32_t min_bytes;  // shortest completion of the whole stack from here
  };
  const Node& node(uint32_t id) const { return nodes_[id]; }
  size_t node_count() const { return nodes_.size(); }

  // The ready stacks of the grammar's start.
  void initial(std::vector<uint32_t>& out);
  // Every ready stack of `in` advanced by `b` (sorted, without duplicates; empty: no stack takes b).
  void advance(const std::vector<uint32_t>& in, uint8_t b, std::vector<uint32_t>& out);
  // The ready stacks from element `pos` on, below `parent` (sorted, without duplicates).
  void ready_from(uint32_t parent, uint32_t pos, std::vector<uint32_t>& out);
  // Bytes that some stack of `in` takes next.
  ByteSet first_bytes(const std::vector<uint32_t>& in) const;
  uint32_t min_bytes(const std::vector<uint32_t>& in) const;

  struct Mark {
    size_t nodes;
    uint64_t generation;
  };
  Mark mark() const { return {nodes_.size(), generation_}; }
  void rollback(const Mark& mark);
  // Drops every node not on a stack of `live` (renumbering `live`), when the pool has grown large.
  void compact(std::vector<uint32_t>& live);

 private:
  uint32_t intern(uint32_t pos, uint32_t count, uint8_t sub, uint32_t parent);
  void settle(uint32_t parent, uint32_t pos, uint32_t count, uint8_t sub, std::vector<uint32_t>& out);
  uint32_t contribution(uint32_t pos, uint32_t count, uint8_t sub) const;
  void rehash(size_t slots);
  size_t slot_of(uint32_t pos, uint32_t count, uint8_t sub, uint32_t parent) const;

  const Grammar* grammar_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> slots_;         // open addressing, 0 = free (node 0 is the empty stack)
  std::vector<uint32_t> slot_of_node_;  // the slot each node (after the empty stack) was put in
  uint64_t generation_ = 0;             // bumped by every rehash
};

void sort_unique(std::vector<uint32_t>& ids);

}  // namespace kipp::grammar
