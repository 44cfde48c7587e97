// The prompt-lookup drafter (src/runtime/prompt_lookup.h) on hand-made token histories, and
// the adaptive gate that pauses drafting.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/prompt_lookup.h"

namespace kipp {
namespace {

using Tokens = std::vector<uint32_t>;

Tokens draft(const Tokens& history, uint32_t ngram_min = 2, uint32_t ngram_max = 4, uint32_t max_draft = 8) {
  PromptLookupOptions options;
  options.ngram_min = ngram_min;
  options.ngram_max = ngram_max;
  options.max_draft = max_draft;
  return prompt_lookup_draft(history, options);
}

TEST(PromptLookup, NoEarlierOccurrenceMeansNoDraft) {
  EXPECT_EQ(draft({1, 2, 3, 4, 5, 6}), Tokens{});
  EXPECT_EQ(draft({}), Tokens{});
  EXPECT_EQ(draft({7}), Tokens{});
  EXPECT_EQ(draft({7, 7}), Tokens{});  // the suffix [7 7] has no earlier start
}

TEST(PromptLookup, ProposesWhatFollowedTheMatch) {
  // "10 11 12 13 14" ... then "11 12" again: the draft is what followed "11 12".
  EXPECT_EQ(draft({10, 11, 12, 13, 14, 20, 11, 12}, 2, 4, 2), (Tokens{13, 14}));
  EXPECT_EQ(draft({10, 11, 12, 13, 14, 20, 11, 12}, 2, 4, 3), (Tokens{13, 14, 20}));
}

TEST(PromptLookup, TheMostRecentOccurrenceWins) {
  // [7 8] occurs at 0 (followed by 1) and at 4 (followed by 2).
  EXPECT_EQ(draft({7, 8, 1, 9, 7, 8, 2, 9, 7, 8}, 2, 2, 2), (Tokens{2, 9}));
}

TEST(PromptLookup, LongerNgramsAreTriedFirst) {
  // [1 2 3] occurs at 0 (followed by 50); [2 3] most recently at 5 (followed by 60).
  const Tokens history{1, 2, 3, 50, 9, 2, 3, 60, 1, 2, 3};
  EXPECT_EQ(draft(history, 2, 3, 1), (Tokens{50}));
  EXPECT_EQ(draft(history, 2, 2, 1), (Tokens{60}));
}

TEST(PromptLookup, NgramMinIsRespected) {
  // Only the last token (5) occurs earlier: a 1-gram match, allowed only with ngram_min 1.
  const Tokens history{5, 6, 7, 8, 5};
  EXPECT_EQ(draft(history, 2, 4, 3), Tokens{});
  EXPECT_EQ(draft(history, 1, 4, 3), (Tokens{6, 7, 8}));
}

TEST(PromptLookup, ACopyRunningIntoTheEndContinuesPeriodically) {
  // [1 2 3] at 0 is followed by 4 5 1 2 3 and then the end: the draft copies itself on.
  EXPECT_EQ(draft({1, 2, 3, 4, 5, 1, 2, 3}, 2, 4, 8), (Tokens{4, 5, 1, 2, 3, 4, 5, 1}));
  // A run of one token: [4 4] at 0 is followed by 4, then the copy continues.
  EXPECT_EQ(draft({4, 4, 4}, 2, 4, 5), (Tokens{4, 4, 4, 4, 4}));
}

TEST(PromptLookup, MaxDraftBoundsTheDraft) {
  const Tokens history{1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2};
  EXPECT_EQ(draft(history, 2, 4, 0), Tokens{});
  EXPECT_EQ(draft(history, 2, 4, 1), (Tokens{3}));
  EXPECT_EQ(draft(history, 2, 4, 4), (Tokens{3, 4, 5, 6}));
}

TEST(PromptLookup, InvalidNgramRangesDraftNothing) {
  const Tokens history{1, 2, 3, 1, 2};
  EXPECT_EQ(draft(history, 0, 4, 4), Tokens{});
  EXPECT_EQ(draft(history, 3, 2, 4), Tokens{});
  EXPECT_EQ(draft(history, 2, 2, 4), (Tokens{3, 1, 2, 3}));
}

TEST(DraftGate, StaysOpenWhileDraftsAreAccepted) {
  DraftGate gate(0.5, 8, 16);
  uint32_t generated = 0;
  for (int step = 0; step < 20; ++step) {
    ASSERT_TRUE(gate.open(generated));
    generated += 4;
    gate.record(4, 3, generated);
  }
  EXPECT_TRUE(gate.open(generated));
}

TEST(DraftGate, ClosesForTheCooldownThenRetries) {
  DraftGate gate(0.5, 8, 16);
  gate.record(4, 0, 1);
  EXPECT_TRUE(gate.open(1));  // only 4 of the 8-token window measured
  gate.record(4, 1, 2);       // 1 of 8 accepted: closes until 2 + 16
  EXPECT_FALSE(gate.open(2));
  EXPECT_FALSE(gate.open(17));
  EXPECT_TRUE(gate.open(18));
  // The retry is judged on fresh counts: a good window keeps it open.
  gate.record(8, 8, 19);
  EXPECT_TRUE(gate.open(19));
  gate.record(8, 0, 20);  // halved history (4 of 4) + 0 of 8: 4 of 12 < 0.5
  EXPECT_FALSE(gate.open(20));
}

TEST(DraftGate, DraftLengthRampsUpOnFullAcceptanceAndFallsBackOnRejection) {
  DraftGate gate(0.0, 1000, 16);
  EXPECT_EQ(gate.draft_length(8), 1u);  // a failing drafter wastes one row per step at first
  gate.record(1, 1, 2);
  EXPECT_EQ(gate.draft_length(8), 2u);
  gate.record(2, 2, 5);
  EXPECT_EQ(gate.draft_length(8), 4u);
  gate.record(4, 4, 10);
  EXPECT_EQ(gate.draft_length(8), 8u);
  gate.record(8, 8, 19);
  EXPECT_EQ(gate.draft_length(8), 8u);  // capped by the caller's maximum
  EXPECT_EQ(gate.draft_length(64), 16u);
  gate.record(8, 3, 23);  // 3 accepted: next time one more than that
  EXPECT_EQ(gate.draft_length(8), 4u);
  gate.record(4, 0, 24);
  EXPECT_EQ(gate.draft_length(8), 1u);
}

TEST(DraftGate, CooldownDoublesOnConsecutiveClosures) {
  DraftGate gate(0.5, 2, 10);
  gate.record(2, 0, 1);  // closes until 1 + 10
  EXPECT_FALSE(gate.open(10));
  EXPECT_TRUE(gate.open(11));
  EXPECT_EQ(gate.draft_length(8), 1u);  // the retry starts short
  gate.record(2, 0, 12);                // closes again: until 12 + 20
  EXPECT_FALSE(gate.open(31));
  EXPECT_TRUE(gate.open(32));
  gate.record(2, 2, 33);  // a good window ends the run of closures
  gate.record(2, 0, 34);  // 1 of 3 after halving: closes for the plain cooldown
  EXPECT_FALSE(gate.open(43));
  EXPECT_TRUE(gate.open(44));
}

TEST(DraftGate, ZeroMinimumNeverCloses) {
  DraftGate gate(0.0, 1, 100);
  for (uint32_t g = 1; g < 50; ++g) {
    gate.record(8, 0, g);
    EXPECT_TRUE(gate.open(g));
  }
}

}  // namespace
}  // namespace kipp
