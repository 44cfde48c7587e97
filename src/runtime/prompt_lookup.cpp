#include "runtime/prompt_lookup.h"

#include <algorithm>
#include <cstddef>

namespace kipp {

std::vector<uint32_t> prompt_lookup_draft(std::span<const uint32_t> history, const PromptLookupOptions& options) {
  std::vector<uint32_t> draft;
  const size_t length = history.size();
  if (options.max_draft == 0 || options.ngram_min == 0 || options.ngram_min > options.ngram_max) return draft;
  const size_t longest = std::min<size_t>(options.ngram_max, length == 0 ? 0 : length - 1);
  for (size_t n = longest; n >= options.ngram_min && n > 0; --n) {
    const auto suffix = history.subspan(length - n);
    // Start positions whose match ends before the suffix does, so at least one token follows.
    for (size_t start = length - n; start-- > 0;) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + static_cast<std::ptrdiff_t>(start))) continue;
      for (size_t j = 0; j < options.max_draft; ++j) {
        const size_t at = start + n + j;
        draft.push_back(at < length ? history[at] : draft[at - length]);
      }
      return draft;
    }
  }
  return draft;
}

void DraftGate::record(uint32_t drafted, uint32_t accepted, uint32_t generated) {
  constexpr uint32_t kLongestDraft = 1024;
  constexpr uint32_t kMostDoublings = 4;
  length_ = accepted == drafted ? std::min(kLongestDraft, 2 * std::max(length_, drafted)) : accepted + 1;
  drafted_ += drafted;
  accepted_ += accepted;
  if (drafted_ < window_) return;
  if (static_cast<double>(accepted_) < min_acceptance_ * static_cast<double>(drafted_)) {
    reopen_at_ = generated + (cooldown_ << std::min(consecutive_closures_, kMostDoublings));
    ++consecutive_closures_;
    drafted_ = accepted_ = 0;  // the retry is judged on its own drafts
    length_ = 1;
  } else {
    consecutive_closures_ = 0;
    drafted_ /= 2;
    accepted_ /= 2;
  }
}

}  // namespace kipp
