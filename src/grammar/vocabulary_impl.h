// What TokenVocabulary precomputes once per model: a byte trie of every token a grammar may
// allow, and for the hot state "at a character boundary inside a JSON string" the tokens made of
// plain string characters (no quote, backslash or control byte, valid UTF-8, optionally ending
// inside a character) as bitsets by character count, with a second trie of all other tokens.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_ir.h"

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

// A character class as a grammar spells it: the byte sets of each alternative (one to four
// bytes, and the first byte fixes the length, so characters split a token in one way only).
using CharClass = std::vector<std::vector<ByteSet>>;

// For a repetition of a character class at a character boundary: the tokens made of whole class
// characters (optionally ending inside one) by character count and bytes still needed, and a trie
// of the other tokens that start with a character of the class.
struct ClassTokens {
  static constexpr uint32_t kMaxChars = 32;  // longer tokens go to the trie
  std::vector<uint32_t> any;                 // mask words: every token of the lists below
  std::vector<uint32_t> ids;                 // sorted by (need, characters)
  // ids[start[need][k] .. start[need][k + 1]): k characters, the last still needing `need` bytes.
  std::array<std::array<uint32_t, kMaxChars + 2>, 4> start{};
  TokenTrie rest;
  ByteSet leads{};  // the first bytes of the class's characters
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

  // Built on first use and shared by every grammar over this vocabulary; a bounded number is kept.
  std::shared_ptr<const ClassTokens> class_tokens(const CharClass& char_class) const;

 private:
  mutable std::mutex class_mutex_;
  mutable std::map<CharClass, std::shared_ptr<const ClassTokens>> classes_;
};

}  // namespace kipp::grammar
