#include <algorithm>

#include "grammar/parse_stacks.h"
#include "grammar/vocabulary_impl.h"

namespace kipp::grammar {

namespace {

// Children of `node` from the sorted ids [lo, hi) sharing the first `depth` bytes.
void build_node(TokenTrie& trie, const std::vector<std::string>& bytes, const std::vector<uint32_t>& ids, uint32_t node,
                size_t lo, size_t hi, uint32_t depth) {
  trie.depth = std::max(trie.depth, depth);
  trie.nodes[node].first_token = static_cast<uint32_t>(trie.tokens.size());
  while (lo < hi && bytes[ids[lo]].size() == depth) trie.tokens.push_back(ids[lo++]);
  trie.nodes[node].token_count = static_cast<uint32_t>(trie.tokens.size()) - trie.nodes[node].first_token;
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t i = lo; i < hi;) {
    size_t j = i;
    while (j < hi && bytes[ids[j]][depth] == bytes[ids[i]][depth]) ++j;
    groups.push_back({i, j});
    i = j;
  }
  const uint32_t first = static_cast<uint32_t>(trie.nodes.size());
  trie.nodes[node].first_child = first;
  trie.nodes[node].child_count = static_cast<uint32_t>(groups.size());
  trie.nodes.resize(trie.nodes.size() + groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    trie.nodes[first + g].byte = static_cast<uint8_t>(bytes[ids[groups[g].first]][depth]);
    build_node(trie, bytes, ids, static_cast<uint32_t>(first + g), groups[g].first, groups[g].second, depth + 1);
  }
}

// The token's characters when it is plain string text from a character boundary, and the bytes
// its last character still needs; false when it is not.
bool plain_string_token(const std::string& bytes, uint32_t& chars, uint32_t& need) {
  const StringTables& t = string_tables();
  uint8_t state = kAtCharStart;
  chars = 0;
  for (const char c : bytes) {
    const uint8_t b = static_cast<uint8_t>(c);
    if (state == kAtCharStart) {
      if (b == '\\') return false;
      ++chars;
    }
    const int8_t next = t.next[state][b];
    if (next < 0) return false;
    state = static_cast<uint8_t>(next);
  }
  need = t.pending[state];
  return chars >= 1 && chars <= TokenVocabulary::Impl::kMaxPlainChars;
}

}  // namespace

TokenTrie TokenTrie::build(const std::vector<std::string>& bytes, std::vector<uint32_t> ids) {
  std::sort(ids.begin(), ids.end(),
            [&](uint32_t a, uint32_t b) { return bytes[a] < bytes[b] || (bytes[a] == bytes[b] && a < b); });
  TokenTrie trie;
  trie.nodes.resize(1);
  build_node(trie, bytes, ids, 0, 0, ids.size(), 0);
  return trie;
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::build(std::vector<std::string> token_bytes,
                                                              std::vector<bool> excluded,
                                                              std::vector<uint32_t> end_tokens) {
  auto impl = std::make_unique<Impl>();
  impl->size = static_cast<uint32_t>(token_bytes.size());
  impl->words = (impl->size + 31) / 32;
  excluded.resize(impl->size, true);
  impl->is_end.assign(impl->size, false);
  std::erase_if(end_tokens, [&](uint32_t id) { return id >= impl->size; });
  for (const uint32_t id : end_tokens) impl->is_end[id] = true;
  std::vector<uint32_t> all_ids, other_ids;
  for (auto& need : impl->plain) need.assign(size_t{Impl::kMaxPlainChars + 1} * impl->words, 0);
  for (uint32_t id = 0; id < impl->size; ++id) {
    if (excluded[id] || impl->is_end[id] || token_bytes[id].empty()) continue;
    all_ids.push_back(id);
    uint32_t chars = 0, need = 0;
    if (plain_string_token(token_bytes[id], chars, need))
      impl->plain[need][size_t{chars} * impl->words + id / 32] |= 1u << (id % 32);
    else
      other_ids.push_back(id);
  }
  for (auto& need : impl->plain)
    for (uint32_t k = 1; k <= Impl::kMaxPlainChars; ++k)
      for (uint32_t w = 0; w < impl->words; ++w)
        need[size_t{k} * impl->words + w] |= need[size_t{k - 1} * impl->words + w];
  impl->all = TokenTrie::build(token_bytes, std::move(all_ids));
  impl->not_plain = TokenTrie::build(token_bytes, std::move(other_ids));
  impl->bytes = std::move(token_bytes);
  impl->excluded = std::move(excluded);
  impl->end_tokens = std::move(end_tokens);
  return std::shared_ptr<const TokenVocabulary>(new TokenVocabulary(std::move(impl)));
}

TokenVocabulary::TokenVocabulary(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TokenVocabulary::~TokenVocabulary() = default;
uint32_t TokenVocabulary::size() const { return impl_->size; }
std::span<const uint32_t> TokenVocabulary::end_tokens() const { return impl_->end_tokens; }

}  // namespace kipp::grammar
