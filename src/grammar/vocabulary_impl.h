// What TokenVocabulary precomputes once per model: a byte trie of every token a grammar may
// allow, and for the hot state "at a character boundary inside a JSON string" the tokens made of
// plain string characters (no quote, backslash or control byte, valid UTF-8, optionally ending
// inside a character) as bitsets by character count, with a second trie of all other tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace kipp::grammar {

struct TokenTrie {
  struct Node {
    uint32_t first_child = 0;
    uint32_t child_count = 0;
    uint32_t first_token = 0;  // tokens whose bytes end at this node
    uint32_t token_count = 0;
    uint8_t byte = 0;  // the byte leading here from the parent
  };
  std::vector<Node> nodes;  // nodes[0] is the root; a node's children are contiguous
  std::vector<uint32_t> tokens;
  uint32_t depth = 0;  // the longest token

  static TokenTrie build(const std::vector<std::string>& bytes, std::vector<uint32_t> ids);
};

struct TokenVocabulary::Impl {
  static constexpr uint32_t kMaxPlainChars = 32;  // longer plain tokens go to the other trie

  uint32_t size = 0;
  uint32_t words = 0;  // mask words
  std::vector<std::string> bytes;
  std::vector<bool> excluded;
  std::vector<bool> is_end;
  std::vector<uint32_t> end_tokens;
  TokenTrie all;        // every token a grammar may allow
  TokenTrie not_plain;  // those not in the plain bitsets
  // plain[need][k * words + w]: tokens of 1..k characters whose last character still needs
  // `need` bytes (0: complete), as mask words; k runs 0..kMaxPlainChars.
  std::vector<uint32_t> plain[4];

  const uint32_t* plain_upto(uint32_t need, uint32_t k) const { return plain[need].data() + size_t{k} * words; }
};

}  // namespace kipp::grammar
