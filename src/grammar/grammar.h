// Constrained decoding: grammars (from a JSON Schema, any JSON object, a GBNF text, or the
// Qwen3 tool-call block) and a per-sequence matcher that says which tokens may come next.
//
// A Grammar is compiled once per request and shared by its choices; a TokenVocabulary is built
// once per model (the bytes of every token, indexed for the mask walk); a Matcher is one
// sequence's position in the grammar. The sampling side turns the mask into -inf logits, so
// constraints compose with temperature, top-k/p, penalties, logprobs and n.
//
// Output of the JSON grammars is compact JSON (no insignificant whitespace); strings honour
// minLength/maxLength, numbers minimum/maximum and at most 16 significant digits, so a bounded
// schema always completes in a bounded number of tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kipp::grammar {

class Grammar;  // compiled, immutable, shareable between threads
using GrammarPtr = std::shared_ptr<const Grammar>;

// A JSON Schema (the subset docs/SERVER.md lists) to a grammar of compact JSON. An unsupported
// keyword or a malformed schema is an error naming the keyword and its JSON Pointer path, e.g.
// "unsupported JSON Schema keyword 'patternProperties' at /properties/a".
Expected<GrammarPtr> compile_json_schema(std::string_view schema_json);

// Any JSON object (response_format json_object), compact.
GrammarPtr any_json_object();

// A llama.cpp GBNF grammar (root rule `root`). Errors name the line and column.
Expected<GrammarPtr> compile_gbnf(std::string_view gbnf_text);

// Qwen3 tool-call blocks: one to max_calls blocks, separated by "\n", each
//   <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
// with NAME one of the tools' names and ARGS compact JSON valid against that tool's parameters
// schema (an empty or absent schema: any JSON object). Errors name tools[i] and the keyword.
struct ToolSpec {
  std::string name;
  std::string parameters_schema;  // JSON text; empty: any object
};
Expected<GrammarPtr> compile_tool_calls(std::span<const ToolSpec> tools, uint32_t max_calls);

// The model's tokens as bytes, indexed once for every matcher of that model.
class TokenVocabulary {
 public:
  // token_bytes[id]: the token's bytes; excluded[id]: never allowed by a grammar (control
  // tokens, unused ids). end_tokens: allowed exactly when the grammar accepts what came so far.
  static std::shared_ptr<const TokenVocabulary> build(std::vector<std::string> token_bytes, std::vector<bool> excluded,
                                                      std::vector<uint32_t> end_tokens);
  ~TokenVocabulary();
  uint32_t size() const;
  std::span<const uint32_t> end_tokens() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit TokenVocabulary(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One sequence's position in a grammar. Not thread-safe; one per sequence.
class Matcher {
 public:
  Matcher(GrammarPtr grammar, std::shared_ptr<const TokenVocabulary> vocabulary);
  ~Matcher();
  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;

  // The tokens allowed next: bit (id % 32) of mask[id / 32]; mask holds (size + 31) / 32 words.
  // End tokens are set when the grammar accepts the output so far. Never empty before done().
  // token_budget: the tokens the sequence may still produce (this one included). When it is
  // finite, only tokens after which the grammar can still be completed within the rest of the
  // budget are allowed (a completion of k bytes needs at most k tokens: every byte is a token),
  // so any grammar whose shortest completion fits the budget ends complete, whatever the weights.
  void fill_mask(std::span<uint32_t> mask, uint32_t token_budget = UINT32_MAX);
  // Bytes of the shortest completion from here (0 when accepting).
  uint32_t min_bytes_to_accept() const;
  // Advances by one token; an error (the matcher unchanged) when the token is not allowed.
  Status accept(uint32_t token);
  // Advances by raw bytes (prompt-side forcing, tests); an error when not allowed.
  Status accept_bytes(std::string_view bytes);
  bool accepting() const;  // what came so far is a complete sentence of the grammar
  bool done() const;       // accepting, and no byte may follow: the sequence ends here

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace kipp::grammar
