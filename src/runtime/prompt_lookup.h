// Prompt-lookup drafting for speculative decoding: the draft is what followed the most recent
// earlier occurrence of the sequence's last few tokens. No second model: copy-heavy output
// (quoting the prompt, repeating a list, editing code) is predicted from the history itself.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kipp {

struct PromptLookupOptions {
  uint32_t ngram_min = 2;  // shortest suffix matched (>= 1)
  uint32_t ngram_max = 4;  // longest suffix matched, tried first (>= ngram_min)
  uint32_t max_draft = 8;  // most tokens proposed
};

// Up to options.max_draft tokens proposed to follow `history`, or none. For n from ngram_max
// down to ngram_min, the last n tokens are looked up at earlier start positions, latest first;
// the first match wins and the draft is the tokens that followed it. When those run into the
// end of the history, the copy continues from the draft itself (the match is read as a period:
// "a b a b" continues "a b a b ..."). A linear scan per n: O(len(history) * ngram_max) per call,
// small next to a forward pass.
std::vector<uint32_t> prompt_lookup_draft(std::span<const uint32_t> history, const PromptLookupOptions& options);

// The adaptive gate: every drafted token costs a row of the verifying eval, so drafting must
// pay for itself. The draft length starts at 1, doubles after each fully accepted draft and
// falls back to one more than the accepted count after a rejection, so a failing drafter
// wastes few rows. Acceptance is counted over the drafted tokens since the last decision; once
// `window` of them are in, a rate below `min_acceptance` closes the gate for `cooldown`
// generated tokens, doubled for each consecutive closure (up to 16x), and the retry starts
// with fresh counts; otherwise both counts are halved (older steps weigh less).
class DraftGate {
 public:
  DraftGate(double min_acceptance, uint32_t window, uint32_t cooldown)
      : min_acceptance_(min_acceptance), window_(window), cooldown_(cooldown) {}

  // May the step after `generated` tokens draft?
  bool open(uint32_t generated) const { return generated >= reopen_at_; }
  // How many tokens the next draft may have, at most `max_draft`.
  uint32_t draft_length(uint32_t max_draft) const { return length_ < max_draft ? length_ : max_draft; }
  // A drafting step: `drafted` tokens proposed, `accepted` of them agreed with; `generated`
  // tokens in all after it.
  void record(uint32_t drafted, uint32_t accepted, uint32_t generated);

 private:
  double min_acceptance_;
  uint32_t window_, cooldown_;
  uint32_t drafted_ = 0, accepted_ = 0;
  uint32_t reopen_at_ = 0;
  uint32_t length_ = 1;
  uint32_t consecutive_closures_ = 0;
};

}  // namespace kipp
