// The tokens of a character class, split once per class: those made of class characters go to
// lists by character count, the others that start with a class character to a trie.
#include <algorithm>

#include "grammar/vocabulary_impl.h"

namespace kipp::grammar {

namespace {

constexpr size_t kCachedClasses = 16;

// The token's characters when it is made of class characters from a character boundary, and the
// bytes its last character still needs; false when it is not (or has too many characters).
bool class_token(const CharClass& char_class, const std::array<uint8_t, 256>& length, const std::string& bytes,
                 uint32_t& chars, uint32_t& need) {
  chars = 0;
  need = 0;
  for (size_t at = 0; at < bytes.size();) {
    const uint8_t lead = static_cast<uint8_t>(bytes[at]);
    const size_t n = length[lead];
    if (n == 0) return false;
    const size_t have = std::min(n, bytes.size() - at);
    const bool matches = std::any_of(char_class.begin(), char_class.end(), [&](const std::vector<ByteSet>& alt) {
      if (alt.size() != n) return false;
      for (size_t i = 0; i < have; ++i)
        if (!byte_set_has(alt[i], static_cast<uint8_t>(bytes[at + i]))) return false;
      return true;
    });
    if (!matches) return false;
    ++chars;
    need = static_cast<uint32_t>(n - have);
    at += have;
  }
  return chars >= 1 && chars <= ClassTokens::kMaxChars;
}

std::shared_ptr<const ClassTokens> build_class_tokens(const TokenVocabulary::Impl& v, const CharClass& char_class) {
  auto out = std::make_shared<ClassTokens>();
  std::array<uint8_t, 256> length{};
  for (const auto& alt : char_class)
    for (int b = 0; b < 256; ++b)
      if (byte_set_has(alt.front(), static_cast<uint8_t>(b))) {
        length[b] = static_cast<uint8_t>(alt.size());
        byte_set_add(out->leads, static_cast<uint8_t>(b));
      }
  out->any.assign(v.words, 0);
  std::vector<std::array<uint32_t, 3>> listed;  // need, characters, id
  std::vector<uint32_t> others;
  for (uint32_t id = 0; id < v.size; ++id) {
    if (v.excluded[id] || v.is_end[id] || v.bytes[id].empty()) continue;
    if (!byte_set_has(out->leads, static_cast<uint8_t>(v.bytes[id][0]))) continue;
    uint32_t chars = 0, need = 0;
    if (class_token(char_class, length, v.bytes[id], chars, need)) {
      listed.push_back({need, chars, id});
      out->any[id / 32] |= 1u << (id % 32);
    } else {
      others.push_back(id);
    }
  }
  std::sort(listed.begin(), listed.end());
  size_t at = 0;
  for (uint32_t need = 0; need < 4; ++need)
    for (uint32_t k = 0; k <= ClassTokens::kMaxChars + 1; ++k) {
      while (at < listed.size() && (listed[at][0] < need || (listed[at][0] == need && listed[at][1] < k))) ++at;
      out->start[need][k] = static_cast<uint32_t>(at);
    }
  for (const auto& entry : listed) out->ids.push_back(entry[2]);
  out->rest = TokenTrie::build(v.bytes, std::move(others));
  return out;
}

}  // namespace

std::shared_ptr<const ClassTokens> TokenVocabulary::Impl::class_tokens(const CharClass& char_class) const {
  const std::lock_guard<std::mutex> lock(class_mutex_);
  if (const auto it = classes_.find(char_class); it != classes_.end()) return it->second;
  // Matchers hold the classes they use, so dropping the cache frees only what no one uses.
  if (classes_.size() >= kCachedClasses) classes_.clear();
  auto built = build_class_tokens(*this, char_class);
  classes_.emplace(char_class, built);
  return built;
}

}  // namespace kipp::grammar
