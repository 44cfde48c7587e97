#include "runtime/stop_strings.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kipp {
namespace {

struct Streamed {
  std::string text;
  bool stopped = false;
  int stop_pushes = 0;  // pushes that reported `stopped`
};

// Feeds `pieces` in order and collects the emitted text (plus flush() when not stopped).
Streamed stream(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopStringMatcher matcher(stops);
  Streamed out;
  for (const auto& piece : pieces) {
    auto o = matcher.push(piece);
    out.text += o.text;
    if (o.stopped) {
      out.stopped = true;
      ++out.stop_pushes;
    }
  }
  out.text += matcher.flush();
  return out;
}

// The oracle on the whole text: the stop string that ends first (ties: the longest) wins.
Streamed reference(const std::vector<std::string>& stops, const std::string& text) {
  size_t best_end = std::string::npos, best_pos = std::string::npos;
  for (const auto& stop : stops) {
    if (stop.empty()) continue;
    for (size_t pos = 0; pos + stop.size() <= text.size(); ++pos) {
      if (text.compare(pos, stop.size(), stop) != 0) continue;
      const size_t end = pos + stop.size();
      if (end < best_end || (end == best_end && pos < best_pos)) {
        best_end = end;
        best_pos = pos;
      }
      break;
    }
  }
  if (best_pos == std::string::npos) return {text, false, 0};
  return {text.substr(0, best_pos), true, 1};
}

TEST(StopStringMatcher, NoStopsPassesEverythingThrough) {
  StopStringMatcher matcher({});
  auto o = matcher.push("Hello <");
  EXPECT_EQ(o.text, "Hello <");
  EXPECT_FALSE(o.stopped);
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStringMatcher, EmptyStopStringsAreIgnored) {
  StopStringMatcher matcher({"", "END"});
  auto o = matcher.push("abc");
  EXPECT_EQ(o.text, "abc");
  EXPECT_FALSE(o.stopped);
  o = matcher.push("xEND");
  EXPECT_EQ(o.text, "x");
  EXPECT_TRUE(o.stopped);
}

TEST(StopStringMatcher, StopInOnePushEmitsTextBeforeIt) {
  StopStringMatcher matcher({"</s>"});
  auto o = matcher.push("Hello</s> and more");
  EXPECT_EQ(o.text, "Hello");
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStringMatcher, StopSpanningManyPushes) {
  StopStringMatcher matcher({"</s>"});
  auto o = matcher.push("Hel");
  EXPECT_EQ(o.text, "Hel");
  o = matcher.push("lo<");
  EXPECT_EQ(o.text, "lo");  // "<" held back
  EXPECT_FALSE(o.stopped);
  o = matcher.push("/");
  EXPECT_EQ(o.text, "");
  o = matcher.push("s");
  EXPECT_EQ(o.text, "");
  EXPECT_FALSE(o.stopped);
  o = matcher.push(">tail");
  EXPECT_EQ(o.text, "");
  EXPECT_TRUE(o.stopped);
}

TEST(StopStringMatcher, HeldTextIsReleasedWhenItCannotMatch) {
  StopStringMatcher matcher({"</s>"});
  EXPECT_EQ(matcher.push("a</").text, "a");
  auto o = matcher.push("b");
  EXPECT_EQ(o.text, "</b");
  EXPECT_FALSE(o.stopped);
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStringMatcher, FlushReturnsHeldText) {
  StopStringMatcher matcher({"</s>"});
  EXPECT_EQ(matcher.push("x</").text, "x");
  EXPECT_EQ(matcher.flush(), "</");
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStringMatcher, InputAfterStopIsIgnored) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_TRUE(matcher.push("aSTOPb").stopped);
  auto o = matcher.push("more STOP text");
  EXPECT_EQ(o.text, "");
  EXPECT_FALSE(o.stopped);
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStringMatcher, SelfOverlappingStop) {
  // "aaab" with stop "aab": the held "aa" must shift by one when the third 'a' arrives.
  auto s = stream({"aab"}, {"a", "a", "a", "b", "c"});
  EXPECT_EQ(s.text, "a");
  EXPECT_TRUE(s.stopped);
  s = stream({"abab"}, {"ab", "ab", "ab"});
  EXPECT_EQ(s.text, "");
  EXPECT_TRUE(s.stopped);
  s = stream({"abac"}, {"aba", "bac"});
  EXPECT_EQ(s.text, "ab");
  EXPECT_TRUE(s.stopped);
}

TEST(StopStringMatcher, HoldsLongestPrefixOverAllStops) {
  StopStringMatcher matcher({"xyz", "yzw"});
  auto o = matcher.push("axy");
  EXPECT_EQ(o.text, "a");  // "xy" is a prefix of "xyz"
  o = matcher.push("z");
  EXPECT_EQ(o.text, "");
  EXPECT_TRUE(o.stopped);
}

TEST(StopStringMatcher, FirstCompletedStopWins) {
  // "bc" completes at byte 3, before "abcd" could: the same whether pushed whole or split.
  auto whole = stream({"abcd", "bc"}, {"xabcd"});
  EXPECT_EQ(whole.text, "xa");
  EXPECT_TRUE(whole.stopped);
  auto split = stream({"abcd", "bc"}, {"xab", "c", "d"});
  EXPECT_EQ(split.text, "xa");
  // Both end at the same byte: the longer one (earlier start) wins.
  auto tie = stream({"c", "abc"}, {"xabc"});
  EXPECT_EQ(tie.text, "x");
  EXPECT_TRUE(tie.stopped);
}

TEST(StopStringMatcher, Utf8StopAcrossPushes) {
  // "世界" spans two pushes; the emitted text is always whole characters.
  StopStringMatcher matcher({"世界"});
  auto o = matcher.push("你好世");
  EXPECT_EQ(o.text, "你好");
  o = matcher.push("界!");
  EXPECT_EQ(o.text, "");
  EXPECT_TRUE(o.stopped);
  // "è" (C3 A8) shares its lead byte with "é" (C3 A9) but a complete "è" is not held.
  StopStringMatcher accents({"é"});
  o = accents.push("caf\xC3\xA8");
  EXPECT_EQ(o.text, "caf\xC3\xA8");
  EXPECT_FALSE(o.stopped);
  o = accents.push("caf\xC3\xA9!");
  EXPECT_EQ(o.text, "caf");
  EXPECT_TRUE(o.stopped);
}

TEST(StopStringMatcher, EveryOneByteSplitOfTextIsOneStream) {
  const std::vector<std::string> stops = {"<|im_end|>", "\n\nUser:"};
  const std::string text = "Sure.\n\nUse<|im_e <|im_end|> after";
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  auto s = stream(stops, bytes);
  EXPECT_EQ(s.text, "Sure.\n\nUse<|im_e ");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.stop_pushes, 1);
}

TEST(StopStringMatcher, RandomSplitsAgreeWithWholeTextOracle) {
  // Small alphabet so stop strings and their prefixes overlap a lot.
  const std::vector<std::vector<std::string>> stop_sets = {
      {"abc"}, {"aab", "ab"}, {"abca", "bca", "cc"}, {"aaaa", "aab", "baa"}, {"abab", "ba", ""}};
  std::mt19937 rng(1234);
  for (const auto& stops : stop_sets) {
    for (int trial = 0; trial < 400; ++trial) {
      std::string text;
      const int length = static_cast<int>(rng() % 16);
      for (int i = 0; i < length; ++i) text.push_back(static_cast<char>('a' + rng() % 3));
      const Streamed expected = reference(stops, text);
      std::vector<std::string> pieces;
      size_t pos = 0;
      while (pos < text.size()) {
        const size_t n = std::min<size_t>(text.size() - pos, rng() % 4);  // empty pieces too
        pieces.push_back(text.substr(pos, n));
        pos += n;
      }
      const Streamed got = stream(stops, pieces);
      ASSERT_EQ(got.text, expected.text) << "text '" << text << "'";
      ASSERT_EQ(got.stopped, expected.stopped) << "text '" << text << "'";
      ASSERT_LE(got.stop_pushes, 1);
    }
  }
}

}  // namespace
}  // namespace kipp
