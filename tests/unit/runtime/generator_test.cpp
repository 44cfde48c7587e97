// Generation (src/runtime/generator.h) on the micro GGUF (random weights, the small test
// tokenizer): stop tokens, stop strings across tokens, the token budget, cancelling, seeds,
// a full context, argument errors, what the session holds afterwards, and speculative decoding
// giving token for token the output of plain greedy decoding.
//
// The model's output is arbitrary, so each test first runs a reference generation and builds
// its case from what the model actually produces.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "runtime/generator.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/tokenizer_fixtures.h"

namespace kipp {
namespace {

using testing::engine_model_path;
namespace small = testing::small;

std::vector<uint32_t> random_tokens(uint32_t seed, size_t count) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> id(0, small::kVocab - 1);
  std::vector<uint32_t> tokens(count);
  for (uint32_t& t : tokens) t = id(rng);
  return tokens;
}

std::vector<uint32_t> ids_of(const GenerateResult& result) {
  std::vector<uint32_t> ids;
  for (const SampledToken& t : result.tokens) ids.push_back(t.id);
  return ids;
}

GenerateOptions greedy(uint32_t max_tokens) {
  GenerateOptions options;
  options.sampling.temperature = 0;
  options.max_tokens = max_tokens;
  options.stop_tokens = {small::kUnused};  // effectively none (checked where it matters)
  return options;
}

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto engine = Engine::open(engine_model_path());
    ASSERT_TRUE(engine.ok()) << engine.message();
    engine_ = std::move(engine).value();
  }

  std::unique_ptr<Session> session(uint32_t capacity = 0) {
    SessionOptions options;
    options.capacity = capacity;
    auto created = engine_->create_session(options);
    EXPECT_TRUE(created.ok()) << created.message();
    return created.ok() ? std::move(created).value() : nullptr;
  }

  struct Run {
    GenerateResult result;
    std::vector<std::string> pieces;  // what the callback received
    std::vector<uint32_t> session_tokens;
  };

  // Generates in a fresh session of `capacity` (0: the model's), recording the callback.
  Run run(std::span<const uint32_t> prompt, const GenerateOptions& options, uint32_t capacity = 0,
          int cancel_after_pieces = -1) {
    auto s = session(capacity);
    Run out;
    auto result = generate(*engine_, *s, prompt, options, [&](std::string_view text) {
      EXPECT_FALSE(text.empty());
      out.pieces.emplace_back(text);
      return cancel_after_pieces < 0 || static_cast<int>(out.pieces.size()) < cancel_after_pieces;
    });
    EXPECT_TRUE(result.ok()) << result.message();
    if (result.ok()) out.result = std::move(result).value();
    out.session_tokens.assign(s->tokens().begin(), s->tokens().end());
    EXPECT_TRUE(cache_is_consistent(*s));
    return out;
  }

  // The session's cache holds exactly its tokens: the next position's logits equal those of a
  // fresh session evaluating the same tokens (bitwise; the engine is deterministic per row).
  ::testing::AssertionResult cache_is_consistent(Session& s) {
    if (s.length() == 0 || s.length() >= s.capacity()) return ::testing::AssertionSuccess();
    const std::vector<uint32_t> tokens(s.tokens().begin(), s.tokens().end());
    const uint32_t probe = 65;  // 'A'
    std::vector<float> continued(small::kVocab), fresh(small::kVocab);
    if (Status st = s.eval(std::span<const uint32_t>(&probe, 1), 1, continued.data()); !st.ok())
      return ::testing::AssertionFailure() << st.message();
    auto other = session(s.capacity());
    std::vector<uint32_t> all = tokens;
    all.push_back(probe);
    if (Status st = other->eval(all, 1, fresh.data()); !st.ok()) return ::testing::AssertionFailure() << st.message();
    for (size_t i = 0; i < fresh.size(); ++i)
      if (std::bit_cast<uint32_t>(fresh[i]) != std::bit_cast<uint32_t>(continued[i]))
        return ::testing::AssertionFailure() << "the cache differs from a fresh eval of its tokens (logit " << i << ")";
    if (Status st = s.truncate(static_cast<uint32_t>(tokens.size())); !st.ok())
      return ::testing::AssertionFailure() << st.message();
    return ::testing::AssertionSuccess();
  }

  // What streaming `ids` gives as text (IncrementalDecoder, then its finish()).
  std::string text_of(std::span<const uint32_t> ids) {
    IncrementalDecoder decoder(engine_->tokenizer());
    std::string text;
    for (uint32_t id : ids) {
      auto piece = decoder.push(id);
      EXPECT_TRUE(piece.ok());
      if (piece.ok()) text += *piece;
    }
    return text + decoder.finish();
  }

  std::unique_ptr<Engine> engine_;
};

std::string concat(const std::vector<std::string>& pieces) {
  std::string all;
  for (const auto& p : pieces) all += p;
  return all;
}

const std::vector<uint32_t> kPrompt = {small::kHello, 32, 119, 111, 114, 108, 100};  // "hello world"

TEST_F(GeneratorTest, GreedyRunsToMaxTokensAndTheSessionHoldsPromptAndOutput) {
  const Run r = run(kPrompt, greedy(12));
  EXPECT_EQ(r.result.finish, FinishReason::Length);
  ASSERT_EQ(r.result.tokens.size(), 12u);
  EXPECT_EQ(r.result.stats.generated_tokens, 12u);
  EXPECT_EQ(r.result.stats.prompt_tokens, kPrompt.size());
  EXPECT_EQ(r.result.stats.decode_steps, 12u);
  EXPECT_FALSE(r.result.stop_token.has_value());
  std::vector<uint32_t> expected = kPrompt;
  for (uint32_t id : ids_of(r.result)) expected.push_back(id);
  EXPECT_EQ(r.session_tokens, expected);
  EXPECT_EQ(r.result.text, concat(r.pieces));
  EXPECT_EQ(r.result.text, text_of(ids_of(r.result)));
  for (const SampledToken& t : r.result.tokens) EXPECT_LE(t.logprob, 0.0f);
  EXPECT_GE(r.result.stats.prefill_seconds, 0.0);
  EXPECT_GT(r.result.stats.decode_seconds, 0.0);
}

TEST_F(GeneratorTest, GreedyIsPlainArgmaxFeedback) {
  const Run r = run(kPrompt, greedy(6));
  auto s = session();
  std::vector<float> logits(small::kVocab);
  ASSERT_TRUE(s->eval(kPrompt, 1, logits.data()).ok());
  for (uint32_t expected : ids_of(r.result)) {
    const auto best = static_cast<uint32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_EQ(best, expected);
    ASSERT_TRUE(s->eval(std::span<const uint32_t>(&expected, 1), 1, logits.data()).ok());
  }
}

TEST_F(GeneratorTest, MaxTokensZeroOnlyEvaluatesThePrompt) {
  const Run r = run(kPrompt, greedy(0));
  EXPECT_EQ(r.result.finish, FinishReason::Length);
  EXPECT_TRUE(r.result.tokens.empty());
  EXPECT_TRUE(r.pieces.empty());
  EXPECT_EQ(r.session_tokens, kPrompt);
}

TEST_F(GeneratorTest, DefaultStopTokensAreTheModelsEos) {
  // The small tokenizer has neither <|im_end|> nor <|endoftext|>.
  EXPECT_EQ(default_stop_tokens(*engine_), std::vector<uint32_t>{small::kImStart});
}

TEST_F(GeneratorTest, AStopTokenEndsGenerationUnemittedAndUncached) {
  const Run reference = run(kPrompt, greedy(24));
  const std::vector<uint32_t> ids = ids_of(reference.result);
  ASSERT_EQ(std::count(ids.begin(), ids.end(), small::kUnused), 0) << "the reference must not stop";
  // The first generated token that did not occur before it: stopping on it cuts there.
  size_t k = 1;
  while (k < ids.size() && std::find(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids[k]) !=
                               ids.begin() + static_cast<std::ptrdiff_t>(k))
    ++k;
  ASSERT_LT(k, ids.size()) << "the micro model repeats one token only";

  GenerateOptions options = greedy(24);
  options.stop_tokens = {ids[k]};
  const Run stopped = run(kPrompt, options);
  EXPECT_EQ(stopped.result.finish, FinishReason::StopToken);
  ASSERT_TRUE(stopped.result.stop_token.has_value());
  EXPECT_EQ(*stopped.result.stop_token, ids[k]);
  EXPECT_EQ(ids_of(stopped.result), std::vector<uint32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k)));
  std::vector<uint32_t> expected = kPrompt;
  expected.insert(expected.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k));
  EXPECT_EQ(stopped.session_tokens, expected);  // the stop token is not in the cache
  EXPECT_EQ(stopped.result.text, text_of(std::span(ids).first(k)));

  // With include_stop_token_text its text is emitted, still without the token.
  options.include_stop_token_text = true;
  const Run with_text = run(kPrompt, options);
  EXPECT_EQ(with_text.result.finish, FinishReason::StopToken);
  EXPECT_EQ(ids_of(with_text.result), ids_of(stopped.result));
  EXPECT_EQ(with_text.session_tokens, expected);
  EXPECT_EQ(with_text.result.text, text_of(std::span(ids).first(k + 1)));
}

TEST_F(GeneratorTest, StopStringsMatchAcrossTokensAndAreNotEmitted) {
  const Run reference = run(kPrompt, greedy(32));
  // One character from the end of one piece and one from the start of the next: a stop string
  // that no single token's text contains.
  ASSERT_GE(reference.pieces.size(), 4u);
  const auto last_char = [](const std::string& s) {
    size_t start = s.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    return s.substr(start);
  };
  const auto first_char = [](const std::string& s) {
    size_t end = 1;
    while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) ++end;
    return s.substr(0, end);
  };
  const size_t p = 2;
  const std::string stop = last_char(reference.pieces[p]) + first_char(reference.pieces[p + 1]);
  const size_t at = reference.result.text.find(stop);
  ASSERT_NE(at, std::string::npos);

  GenerateOptions options = greedy(32);
  options.stop = {"never-produced-\x01", stop};
  const Run stopped = run(kPrompt, options);
  EXPECT_EQ(stopped.result.finish, FinishReason::StopString);
  EXPECT_EQ(stopped.result.text, reference.result.text.substr(0, at));
  EXPECT_EQ(concat(stopped.pieces), stopped.result.text);
  // The tokens up to the one completing the stop string were generated and stay cached.
  const std::vector<uint32_t> ids = ids_of(stopped.result);
  ASSERT_FALSE(ids.empty());
  const std::vector<uint32_t> all = ids_of(reference.result);
  EXPECT_TRUE(std::equal(ids.begin(), ids.end(), all.begin()));
  EXPECT_NE(text_of(ids).find(stop), std::string::npos);
  EXPECT_EQ(text_of(std::span(ids).first(ids.size() - 1)).find(stop), std::string::npos);
  EXPECT_EQ(stopped.session_tokens.size(), kPrompt.size() + ids.size());
}

TEST_F(GeneratorTest, TheCallbackCancels) {
  const Run reference = run(kPrompt, greedy(32));
  ASSERT_GE(reference.pieces.size(), 4u);
  const Run cancelled = run(kPrompt, greedy(32), 0, 3);
  EXPECT_EQ(cancelled.result.finish, FinishReason::Cancelled);
  ASSERT_EQ(cancelled.pieces.size(), 3u);  // nothing after the cancelling call
  EXPECT_EQ(cancelled.result.text, concat(cancelled.pieces));
  EXPECT_EQ(cancelled.result.text, concat({reference.pieces.begin(), reference.pieces.begin() + 3}));
  EXPECT_LT(cancelled.result.tokens.size(), reference.result.tokens.size());
  EXPECT_EQ(cancelled.session_tokens.size(), kPrompt.size() + cancelled.result.tokens.size());
}

TEST_F(GeneratorTest, SeedsMakeSamplingReproducible) {
  GenerateOptions options = greedy(24);
  options.sampling.temperature = 1.0f;
  options.sampling.top_logprobs = 3;
  options.sampling.seed = 7;
  options.sampling.logit_bias = {{small::kUnused, -100.0f}};  // never sampled: no early stop
  const Run a = run(kPrompt, options), b = run(kPrompt, options);
  EXPECT_EQ(ids_of(a.result), ids_of(b.result));
  EXPECT_EQ(a.result.text, b.result.text);
  ASSERT_EQ(a.result.tokens.size(), 24u);
  for (size_t i = 0; i < a.result.tokens.size(); ++i) {
    EXPECT_EQ(a.result.tokens[i].logprob, b.result.tokens[i].logprob);
    EXPECT_EQ(a.result.tokens[i].top.size(), 3u);
  }
  options.sampling.seed = 8;
  const Run c = run(kPrompt, options);
  EXPECT_NE(ids_of(a.result), ids_of(c.result));
}

TEST_F(GeneratorTest, AFullSessionEndsWithContextFull) {
  const auto capacity = static_cast<uint32_t>(kPrompt.size() + 5);
  const Run r = run(kPrompt, greedy(50), capacity);
  EXPECT_EQ(r.result.finish, FinishReason::ContextFull);
  EXPECT_EQ(r.result.tokens.size(), 5u);
  EXPECT_EQ(r.session_tokens.size(), capacity);
  const Run reference = run(kPrompt, greedy(5));
  EXPECT_EQ(ids_of(r.result), ids_of(reference.result));

  // A prompt that fills the session exactly: nothing can be generated.
  const Run full = run(kPrompt, greedy(50), static_cast<uint32_t>(kPrompt.size()));
  EXPECT_EQ(full.result.finish, FinishReason::ContextFull);
  EXPECT_TRUE(full.result.tokens.empty());
}

TEST_F(GeneratorTest, GenerationContinuesAConversation) {
  auto s = session();
  auto first = generate(*engine_, *s, kPrompt, greedy(5));
  ASSERT_TRUE(first.ok()) << first.message();
  const std::vector<uint32_t> more = {small::kSpaceThe, 32, 97};
  auto second = generate(*engine_, *s, more, greedy(5));
  ASSERT_TRUE(second.ok()) << second.message();
  // The same as generating from the whole history in one go.
  std::vector<uint32_t> whole = kPrompt;
  for (uint32_t id : ids_of(*first)) whole.push_back(id);
  whole.insert(whole.end(), more.begin(), more.end());
  const Run at_once = run(whole, greedy(5));
  EXPECT_EQ(ids_of(*second), ids_of(at_once.result));
  EXPECT_EQ(s->length(), whole.size() + 5);
}

TEST_F(GeneratorTest, ErrorsAreClearAndGenerateNothing) {
  auto s = session(16);
  auto empty = generate(*engine_, *s, {}, greedy(4));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("the prompt is empty"), std::string::npos) << empty.message();

  const std::vector<uint32_t> long_prompt = random_tokens(1, 17);
  auto too_long = generate(*engine_, *s, long_prompt, greedy(4));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("the prompt (17 tokens) does not fit the session"), std::string::npos)
      << too_long.message();
  EXPECT_EQ(s->length(), 0u);

  GenerateOptions spec = greedy(4);
  spec.speculative.enabled = true;
  spec.sampling.temperature = 0.7f;
  auto sampled_spec = generate(*engine_, *s, kPrompt, spec);
  ASSERT_FALSE(sampled_spec.ok());
  EXPECT_NE(sampled_spec.message().find("speculative decoding is greedy only: temperature must be 0, found 0.7"),
            std::string::npos)
      << sampled_spec.message();

  GenerateOptions bad_stop = greedy(4);
  bad_stop.stop_tokens = {small::kVocab};
  auto out_of_range = generate(*engine_, *s, kPrompt, bad_stop);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.message().find("stop token id 274 is out of range"), std::string::npos)
      << out_of_range.message();

  GenerateOptions bad_sampling = greedy(4);
  bad_sampling.sampling.top_p = 0;
  auto invalid = generate(*engine_, *s, kPrompt, bad_sampling);
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.message().find("top_p"), std::string::npos) << invalid.message();

  auto bad_id = generate(*engine_, *s, std::vector<uint32_t>{1, small::kVocab}, greedy(4));
  ASSERT_FALSE(bad_id.ok());
  EXPECT_EQ(s->length(), 0u);
}

// ---------------------------------------------------------------- speculative decoding

GenerateOptions speculative(GenerateOptions options, uint32_t max_draft = 8) {
  options.speculative.enabled = true;
  options.speculative.max_draft = max_draft;
  return options;
}

class SpeculativeTest : public GeneratorTest {
 public:
  // Plain greedy and speculative generation give the same tokens, logprobs, text pieces, finish
  // and session, with no more decode steps; returns the speculative run's stats.
  GenerateStats identical(const std::vector<uint32_t>& prompt, const GenerateOptions& plain, uint32_t max_draft,
                          uint32_t capacity = 0) {
    const Run a = run(prompt, plain, capacity);
    const Run b = run(prompt, speculative(plain, max_draft), capacity);
    EXPECT_EQ(ids_of(a.result), ids_of(b.result));
    EXPECT_EQ(a.result.text, b.result.text);
    EXPECT_EQ(a.pieces, b.pieces);
    EXPECT_EQ(a.result.finish, b.result.finish);
    EXPECT_EQ(a.result.stop_token, b.result.stop_token);
    EXPECT_EQ(a.session_tokens, b.session_tokens);
    if (a.result.tokens.size() == b.result.tokens.size())
      for (size_t i = 0; i < a.result.tokens.size(); ++i) {
        EXPECT_EQ(std::bit_cast<uint32_t>(a.result.tokens[i].logprob),
                  std::bit_cast<uint32_t>(b.result.tokens[i].logprob));
        EXPECT_EQ(a.result.tokens[i].top.size(), b.result.tokens[i].top.size());
      }
    EXPECT_LE(b.result.stats.decode_steps, a.result.stats.decode_steps);
    EXPECT_EQ(a.result.stats.drafted_tokens, 0u);
    EXPECT_LE(b.result.stats.accepted_tokens, b.result.stats.drafted_tokens);
    return b.result.stats;
  }
};

// A random sequence, then the same again, then its start: the continuation can be copied.
std::vector<uint32_t> copy_heavy_prompt(uint32_t seed) {
  const std::vector<uint32_t> chunk = random_tokens(seed, 24);
  std::vector<uint32_t> prompt = chunk;
  prompt.insert(prompt.end(), chunk.begin(), chunk.end());
  prompt.insert(prompt.end(), chunk.begin(), chunk.begin() + 4);
  return prompt;
}

TEST_F(SpeculativeTest, IdenticalToGreedyOnCopyHeavyAndOtherPrompts) {
  uint32_t drafted = 0, accepted = 0;
  for (uint32_t seed : {11u, 12u, 13u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (uint32_t max_draft : {1u, 3u, 8u}) {
      SCOPED_TRACE("max_draft " + std::to_string(max_draft));
      const GenerateStats copy = identical(copy_heavy_prompt(seed), greedy(40), max_draft);
      drafted += copy.drafted_tokens;
      accepted += copy.accepted_tokens;
      identical(random_tokens(seed, 9), greedy(40), max_draft);
      identical(std::vector<uint32_t>{small::kHello}, greedy(40), max_draft);
    }
  }
  EXPECT_GT(drafted, 0u);
  EXPECT_GT(accepted, 0u);  // random weights still repeat themselves under greedy decoding
}

TEST_F(SpeculativeTest, IdenticalWithPenaltiesBiasAndLogprobs) {
  GenerateOptions options = greedy(40);
  options.sampling.repetition_penalty = 1.3f;
  options.sampling.frequency_penalty = 0.2f;
  options.sampling.presence_penalty = 0.1f;
  options.sampling.logit_bias = {{small::kHello, 2.0f}, {65, -1.0f}};
  options.sampling.top_logprobs = 4;
  identical(copy_heavy_prompt(21), options, 8);
  identical(random_tokens(22, 5), options, 4);
}

TEST_F(SpeculativeTest, IdenticalWhenStoppingInsideADraft) {
  // Stop tokens, stop strings and max_tokens landing anywhere, including inside accepted drafts.
  const std::vector<uint32_t> prompt = copy_heavy_prompt(31);
  const Run reference = run(prompt, greedy(40));
  const std::vector<uint32_t> ids = ids_of(reference.result);
  for (size_t k = 1; k < ids.size(); k += 3) {
    SCOPED_TRACE("k " + std::to_string(k));
    GenerateOptions stop_token = greedy(40);
    stop_token.stop_tokens = {ids[k]};
    identical(prompt, stop_token, 8);
    identical(prompt, greedy(static_cast<uint32_t>(k)), 8);
  }
  for (size_t p = 1; p + 1 < reference.pieces.size(); p += 4) {
    GenerateOptions stop_string = greedy(40);
    stop_string.stop = {reference.pieces[p]};
    identical(prompt, stop_string, 8);
  }
}

TEST_F(SpeculativeTest, IdenticalWhenTheContextFills) {
  const std::vector<uint32_t> prompt = copy_heavy_prompt(41);
  for (uint32_t extra : {1u, 2u, 5u, 9u, 17u}) {
    SCOPED_TRACE("extra " + std::to_string(extra));
    identical(prompt, greedy(40), 8, static_cast<uint32_t>(prompt.size()) + extra);
  }
}

TEST_F(SpeculativeTest, IdenticalWhenCancelled) {
  const std::vector<uint32_t> prompt = copy_heavy_prompt(51);
  for (int after : {1, 2, 5, 9}) {
    const Run a = run(prompt, greedy(40), 0, after);
    const Run b = run(prompt, speculative(greedy(40)), 0, after);
    EXPECT_EQ(a.pieces, b.pieces);
    EXPECT_EQ(a.result.finish, b.result.finish);
    // Cancelled mid-draft, the speculative run stops at the same token.
    EXPECT_EQ(ids_of(a.result), ids_of(b.result));
    EXPECT_EQ(a.session_tokens, b.session_tokens);
  }
}

TEST_F(SpeculativeTest, TheGateStopsDraftingWhenDraftsAreRejected) {
  // min_acceptance 1: any rejection closes the gate for a long cooldown.
  GenerateOptions options = speculative(greedy(60), 8);
  options.speculative.min_acceptance = 1.0;
  options.speculative.gate_window = 1;
  options.speculative.gate_cooldown = 1000;
  const std::vector<uint32_t> prompt = random_tokens(61, 40);
  const Run gated = run(prompt, options);
  options.speculative.min_acceptance = 0.0;
  const Run ungated = run(prompt, options);
  EXPECT_EQ(ids_of(gated.result), ids_of(ungated.result));
  if (ungated.result.stats.accepted_tokens < ungated.result.stats.drafted_tokens) {
    // A rejection happened: the strict gate drafted until its first rejection only.
    EXPECT_LT(gated.result.stats.draft_steps, ungated.result.stats.draft_steps);
  }
  EXPECT_LE(gated.result.stats.drafted_tokens, ungated.result.stats.drafted_tokens);
}

}  // namespace
}  // namespace kipp
