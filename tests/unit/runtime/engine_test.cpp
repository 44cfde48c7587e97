// The engine (src/runtime/engine.h) on the micro GGUF: sessions, capacity and error handling,
// block-table independence, the pooled prefix-sharing mode, batching and multi-row logits.
//
// The CPU backend's kernels follow a determinism contract (every output element is a fixed
// sequence of float operations on its own inputs), so every comparison here is bitwise:
// the same tokens at the same positions must give the same logits however they are split into
// calls, batched, stepped, paged or shared.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/kernels.h"
#include "runtime/engine.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/tokenizer_fixtures.h"

namespace kipp {
namespace {

using testing::engine_model_config;
using testing::engine_model_path;
using testing::micro_config;

constexpr uint32_t kBlock = kKvBlockPositions;

std::vector<uint32_t> random_tokens(uint32_t seed, size_t count) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> id(0, engine_model_config().vocab_size - 1);
  std::vector<uint32_t> tokens(count);
  for (uint32_t& t : tokens) t = id(rng);
  return tokens;
}

std::vector<uint32_t> concat(std::span<const uint32_t> a, std::span<const uint32_t> b) {
  std::vector<uint32_t> joined(a.begin(), a.end());
  joined.insert(joined.end(), b.begin(), b.end());
  return joined;
}

SessionOptions session_options(uint32_t capacity, std::vector<uint32_t> block_order = {}) {
  SessionOptions options;
  options.capacity = capacity;
  options.block_order = std::move(block_order);
  return options;
}

SessionOptions pooled_options(std::vector<uint32_t> block_order = {}) {
  SessionOptions options;
  options.pooled = true;
  options.block_order = std::move(block_order);
  return options;
}

// Same bits, element by element (so -0 != +0 and NaN == NaN of the same payload).
::testing::AssertionResult bitwise_equal(std::span<const float> expected, std::span<const float> actual) {
  if (expected.size() != actual.size())
    return ::testing::AssertionFailure() << "sizes differ: " << expected.size() << " vs " << actual.size();
  for (size_t i = 0; i < expected.size(); ++i)
    if (std::bit_cast<uint32_t>(expected[i]) != std::bit_cast<uint32_t>(actual[i]))
      return ::testing::AssertionFailure()
             << "first difference at float " << i << ": " << expected[i] << " vs " << actual[i];
  return ::testing::AssertionSuccess();
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { engine_ = open_engine(); }

  static std::unique_ptr<Engine> open_engine(const EngineOptions& options = {}) {
    auto engine = Engine::open(engine_model_path(), options);
    EXPECT_TRUE(engine.ok()) << engine.message();
    return engine.ok() ? std::move(engine).value() : nullptr;
  }

  static std::unique_ptr<Session> new_session(Engine& engine, const SessionOptions& options = {}) {
    auto session = engine.create_session(options);
    EXPECT_TRUE(session.ok()) << session.message();
    return session.ok() ? std::move(session).value() : nullptr;
  }
  std::unique_ptr<Session> new_session(const SessionOptions& options = {}) { return new_session(*engine_, options); }

  static uint32_t vocab() { return engine_model_config().vocab_size; }

  // Evaluates `tokens` and returns the logits of the last `rows` of them; empty on failure
  // (with a test failure recorded).
  std::vector<float> eval(Session& session, std::span<const uint32_t> tokens, uint32_t rows = 1) {
    std::vector<float> logits(size_t{rows} * vocab());
    const Status status = session.eval(tokens, rows, logits.data());
    EXPECT_TRUE(status.ok()) << status.message();
    return status.ok() ? logits : std::vector<float>{};
  }

  // Logits of every position of `tokens` in a fresh private session, one call.
  std::vector<float> all_logits_private(Engine& engine, std::span<const uint32_t> tokens) {
    auto session = new_session(engine);
    return eval(*session, tokens, static_cast<uint32_t>(tokens.size()));
  }
  std::vector<float> all_logits_private(std::span<const uint32_t> tokens) {
    return all_logits_private(*engine_, tokens);
  }

  // Rows [first, first + count) of a row-major logits block.
  std::span<const float> rows_of(const std::vector<float>& logits, size_t first, size_t count) const {
    return std::span<const float>(logits).subspan(first * vocab(), count * vocab());
  }

  std::unique_ptr<Engine> engine_;
};

// ------------------------------------------------------------------ (c) sessions

TEST_F(EngineTest, MicroModelFitsTheTestCapacities) {
  ASSERT_NE(engine_, nullptr);
  // The capacities below (up to 192 positions, 6 blocks) stay within this context length.
  EXPECT_EQ(engine_->config().context_length, micro_config().context_length);
  EXPECT_GE(engine_->config().context_length, 192u);
  EXPECT_EQ(engine_->vocab_size(), testing::small::kVocab);
  EXPECT_STREQ(engine_->backend().name(), "cpu");
  EXPECT_FALSE(engine_->pooled_mode());
  EXPECT_FALSE(engine_->create_session(session_options(engine_->config().context_length + 1)).ok());
}

TEST_F(EngineTest, ZeroTokens) {
  auto session = new_session();
  const Status empty = session->eval({}, 0, nullptr);
  ASSERT_TRUE(empty.ok()) << empty.message();
  EXPECT_EQ(session->length(), 0u);

  std::vector<float> logits(vocab());
  const Status asked_logits = session->eval({}, 1, logits.data());
  EXPECT_FALSE(asked_logits.ok());
  EXPECT_EQ(session->length(), 0u);

  // Still usable afterwards, and equal to a session that never saw the empty calls.
  const std::vector<uint32_t> tokens = random_tokens(1, 3);
  auto fresh = new_session();
  EXPECT_TRUE(bitwise_equal(eval(*fresh, tokens), eval(*session, tokens)));
}

TEST_F(EngineTest, OneToken) {
  auto session = new_session();
  const std::vector<uint32_t> token = {7};
  const std::vector<float> logits = eval(*session, token);
  ASSERT_EQ(logits.size(), vocab());
  EXPECT_EQ(session->length(), 1u);
  EXPECT_EQ(session->tokens()[0], 7u);
  for (float v : logits) EXPECT_TRUE(std::isfinite(v));
  // Not a constant output: the model is random but not degenerate.
  EXPECT_NE(*std::min_element(logits.begin(), logits.end()), *std::max_element(logits.begin(), logits.end()));
}

TEST_F(EngineTest, TextAndTokenInputsConverge) {
  auto tokens = engine_->tokenize(" the hello<|im_start|>");
  ASSERT_TRUE(tokens.ok()) << tokens.message();
  ASSERT_GE(tokens->size(), 3u);
  EXPECT_EQ(tokens->front(), testing::small::kSpaceThe);
  EXPECT_EQ(tokens->back(), testing::small::kImStart);
  auto from_text = new_session(), from_tokens = new_session();
  std::vector<float> text_logits(2 * vocab());
  const Status status = from_text->eval_text(" the hello<|im_start|>", 2, text_logits.data());
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(bitwise_equal(eval(*from_tokens, *tokens, 2), text_logits));
}

TEST_F(EngineTest, ManyTokens) {
  const std::vector<uint32_t> tokens = random_tokens(2, 100);
  auto session = new_session();
  const std::vector<float> last = eval(*session, tokens);
  EXPECT_EQ(session->length(), 100u);
  EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), session->tokens().begin(), session->tokens().end()));
  const std::vector<float> all = all_logits_private(tokens);
  EXPECT_TRUE(bitwise_equal(rows_of(all, 99, 1), last));
  // Position matters: the last row differs from the first.
  EXPECT_FALSE(bitwise_equal(rows_of(all, 0, 1), last));
}

TEST_F(EngineTest, FillsExactlyToCapacityThenRejectsMore) {
  constexpr uint32_t kCapacity = 45;  // not a whole number of blocks
  const std::vector<uint32_t> tokens = random_tokens(3, kCapacity + 1);
  const std::span<const uint32_t> all(tokens);
  auto session = new_session(session_options(kCapacity));
  EXPECT_EQ(session->capacity(), kCapacity);
  eval(*session, all.first(30));
  const std::vector<float> at_capacity = eval(*session, all.subspan(30, kCapacity - 30));
  ASSERT_EQ(session->length(), kCapacity);

  std::vector<float> logits(vocab());
  const Status over = session->eval(all.subspan(kCapacity, 1), 1, logits.data());
  EXPECT_FALSE(over.ok());
  EXPECT_NE(over.message().find("capacity"), std::string::npos) << over.message();
  EXPECT_EQ(session->length(), kCapacity);
  EXPECT_TRUE(std::equal(all.begin(), all.begin() + kCapacity, session->tokens().begin(), session->tokens().end()));

  // The rejected call changed nothing: cutting the last token and evaluating it again gives
  // the same logits as when the session was filled.
  ASSERT_TRUE(session->truncate(kCapacity - 1).ok());
  EXPECT_TRUE(bitwise_equal(at_capacity, eval(*session, all.subspan(kCapacity - 1, 1))));
}

TEST_F(EngineTest, OverCapacityEvalLeavesSessionUnchanged) {
  constexpr uint32_t kCapacity = 40;
  const std::vector<uint32_t> tokens = random_tokens(4, kCapacity);
  const std::span<const uint32_t> all(tokens);
  auto session = new_session(session_options(kCapacity));
  eval(*session, all.first(kCapacity - 1));

  std::vector<float> logits(2 * vocab());
  const std::vector<uint32_t> two = {5, 6};  // one more than fits
  EXPECT_FALSE(session->eval(two, 2, logits.data()).ok());
  EXPECT_EQ(session->length(), kCapacity - 1);

  auto fresh = new_session(session_options(kCapacity));
  eval(*fresh, all.first(kCapacity - 1));
  EXPECT_TRUE(bitwise_equal(eval(*fresh, all.subspan(kCapacity - 1)), eval(*session, all.subspan(kCapacity - 1))));
}

TEST_F(EngineTest, BadTokenIdRejectedAndSessionUnchanged) {
  const std::vector<uint32_t> prefix = random_tokens(5, 20), next = random_tokens(6, 4);
  auto session = new_session();
  eval(*session, prefix);

  const std::vector<uint32_t> bad = {3, vocab(), 4};
  std::vector<float> logits(vocab());
  const Status status = session->eval(bad, 1, logits.data());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("token id " + std::to_string(vocab())), std::string::npos) << status.message();
  EXPECT_EQ(session->length(), 20u);

  auto fresh = new_session();
  eval(*fresh, prefix);
  EXPECT_TRUE(bitwise_equal(eval(*fresh, next, 4), eval(*session, next, 4)));
}

TEST_F(EngineTest, LogitsCountBeyondTokensIsRejected) {
  auto session = new_session();
  const std::vector<uint32_t> tokens = {1, 2};
  std::vector<float> logits(3 * vocab());
  EXPECT_FALSE(session->eval(tokens, 3, logits.data()).ok());
  EXPECT_FALSE(session->eval(tokens, 1, nullptr).ok());
  EXPECT_EQ(session->length(), 0u);
}

TEST_F(EngineTest, ResetThenReevalIsBitwiseEqual) {
  const std::vector<uint32_t> tokens = random_tokens(7, 70);
  auto session = new_session();
  const std::vector<float> first = eval(*session, tokens, 70);
  session->reset();
  EXPECT_EQ(session->length(), 0u);
  EXPECT_TRUE(bitwise_equal(first, eval(*session, tokens, 70)));
}

TEST_F(EngineTest, InterleavedSessionsMatchEachAlone) {
  const std::vector<uint32_t> a = random_tokens(8, 60), b = random_tokens(9, 60);
  auto session_a = new_session(), session_b = new_session();
  std::vector<float> interleaved_a, interleaved_b;
  for (size_t begin = 0; begin < 60; begin += 15) {
    const auto chunk_a = eval(*session_a, std::span(a).subspan(begin, 15), 15);
    const auto chunk_b = eval(*session_b, std::span(b).subspan(begin, 15), 15);
    interleaved_a.insert(interleaved_a.end(), chunk_a.begin(), chunk_a.end());
    interleaved_b.insert(interleaved_b.end(), chunk_b.begin(), chunk_b.end());
  }
  EXPECT_TRUE(bitwise_equal(all_logits_private(a), interleaved_a));
  EXPECT_TRUE(bitwise_equal(all_logits_private(b), interleaved_b));
}

TEST_F(EngineTest, TruncateThenReevalIsBitwiseEqual) {
  const std::vector<uint32_t> tokens = random_tokens(10, 90);
  auto session = new_session();
  const std::vector<float> all = eval(*session, tokens, 90);
  for (uint32_t cut : {89u, 64u, 45u, 1u, 0u}) {
    SCOPED_TRACE(cut);
    ASSERT_TRUE(session->truncate(cut).ok());
    EXPECT_EQ(session->length(), cut);
    EXPECT_TRUE(bitwise_equal(rows_of(all, cut, 90 - cut), eval(*session, std::span(tokens).subspan(cut), 90 - cut)));
  }
  EXPECT_FALSE(session->truncate(91).ok());
  EXPECT_EQ(session->length(), 90u);
}

// ------------------------------------------------------------------ (d) block tables

TEST_F(EngineTest, ScrambledBlockOrderGivesBitwiseEqualLogits) {
  constexpr uint32_t kCapacity = 6 * kBlock;
  const std::vector<uint32_t> tokens = random_tokens(11, 5 * kBlock + 7);  // > 3 blocks, last one partial
  const std::span<const uint32_t> all(tokens);
  auto identity = new_session(session_options(kCapacity));
  auto scrambled = new_session(session_options(kCapacity, {4, 2, 5, 0, 3, 1}));
  // Several calls of different sizes, so blocks are filled across calls too.
  for (auto [begin, count] : {std::pair<size_t, size_t>{0, 40}, {40, 1}, {41, 60}, {101, tokens.size() - 101}}) {
    const auto rows = static_cast<uint32_t>(count);
    EXPECT_TRUE(bitwise_equal(eval(*identity, all.subspan(begin, count), rows),
                              eval(*scrambled, all.subspan(begin, count), rows)))
        << "tokens " << begin << ".." << begin + count;
  }
}

TEST_F(EngineTest, InvalidBlockOrdersAreRejected) {
  constexpr uint32_t kCapacity = 4 * kBlock;
  const std::vector<std::vector<uint32_t>> invalid = {
      {0, 1, 2},        // too short
      {0, 1, 2, 3, 4},  // too long
      {0, 1, 1, 3},     // repeats a block
      {0, 1, 2, 4},     // names a block the session does not have
  };
  for (const auto& order : invalid) {
    auto session = engine_->create_session(session_options(kCapacity, order));
    EXPECT_FALSE(session.ok()) << "order of size " << order.size() << " accepted";
  }
  // block_order belongs to private sessions.
  auto pooled_engine = open_engine(EngineOptions{.pool_blocks = 8});
  auto pooled = pooled_engine->create_session(pooled_options({0}));
  EXPECT_FALSE(pooled.ok());
}

// ------------------------------------------------------------------ (e) pooled mode

class EnginePoolTest : public EngineTest {
 protected:
  std::unique_ptr<Engine> open_pooled(uint32_t pool_blocks) {
    return open_engine(EngineOptions{.pool_blocks = pool_blocks});
  }
  static std::unique_ptr<Session> pooled_session(Engine& engine) { return new_session(engine, pooled_options()); }
  // Evaluates `tokens` in a pooled session that then closes, publishing its full blocks.
  void publish(Engine& engine, std::span<const uint32_t> tokens) {
    auto writer = pooled_session(engine);
    eval(*writer, tokens);
  }
  // Evaluates the rest of `tokens` in `session`, which holds their first `from`: its logits must
  // equal those a private session gives for the same positions.
  ::testing::AssertionResult continues_like_private(Engine& engine, Session& session, std::span<const uint32_t> tokens,
                                                    uint32_t from) {
    const auto rest = static_cast<uint32_t>(tokens.size() - from);
    return bitwise_equal(rows_of(all_logits_private(engine, tokens), from, rest),
                         eval(session, tokens.subspan(from), rest));
  }
  // A new pooled session that has adopted the published prefix of `tokens`: a failed adoption,
  // or one of other than `positions` positions where given, is a test failure.
  static std::unique_ptr<Session> adopting_session(Engine& engine, std::span<const uint32_t> tokens,
                                                   std::optional<uint32_t> positions = std::nullopt) {
    auto session = pooled_session(engine);
    const auto adopted = session->match_prefix(tokens);
    if (!adopted.ok()) {
      ADD_FAILURE() << adopted.message();
    } else if (positions) {
      EXPECT_EQ(*adopted, *positions);
    }
    return session;
  }
};

// A pool opened after the engine (sized from what the backend leaves free) is the same pool.
TEST_F(EnginePoolTest, OpenPoolAfterOpen) {
  EXPECT_FALSE(engine_->pooled_mode());
  EXPECT_FALSE(engine_->open_pool(0).ok());
  ASSERT_TRUE(engine_->open_pool(4).ok());
  EXPECT_TRUE(engine_->pooled_mode());
  EXPECT_EQ(engine_->pool_stats().total_blocks, 4u);
  EXPECT_EQ(engine_->pool_stats().free_blocks, 4u);
  EXPECT_FALSE(engine_->open_pool(4).ok());
  SessionOptions pooled;
  pooled.pooled = true;
  pooled.capacity = 64;
  auto session = new_session(pooled);
  ASSERT_NE(session, nullptr);
  const std::vector<uint32_t> tokens{1, 2, 3};
  EXPECT_FALSE(eval(*session, tokens).empty());
}

TEST_F(EnginePoolTest, PooledSessionsNeedAPool) {
  EXPECT_FALSE(engine_->create_session(pooled_options()).ok());
  auto pooled_engine = open_pooled(4);
  EXPECT_TRUE(pooled_engine->pooled_mode());
  EXPECT_EQ(pooled_engine->pool_stats().total_blocks, 4u);
  EXPECT_EQ(pooled_engine->pool_stats().free_blocks, 4u);
  auto private_session = new_session(*pooled_engine);  // private sessions still work beside a pool
  const std::vector<uint32_t> tokens = random_tokens(12, 10);
  EXPECT_TRUE(bitwise_equal(all_logits_private(tokens), eval(*private_session, tokens, 10)));
}

TEST_F(EnginePoolTest, PooledSessionMatchesPrivate) {
  auto engine = open_pooled(8);
  const std::vector<uint32_t> tokens = random_tokens(13, 100);
  auto session = pooled_session(*engine);
  std::vector<float> chunks = eval(*session, std::span(tokens).first(33), 33);
  const std::vector<float> rest = eval(*session, std::span(tokens).subspan(33), 67);
  chunks.insert(chunks.end(), rest.begin(), rest.end());
  EXPECT_TRUE(bitwise_equal(all_logits_private(tokens), chunks));
  EXPECT_EQ(engine->pool_stats().free_blocks, 4u);  // 100 positions: 4 blocks in use
}

TEST_F(EnginePoolTest, SharedPrefixMatchesUnsharedSession) {
  auto engine = open_pooled(16);
  const std::vector<uint32_t> first = random_tokens(14, 100);
  // Shares the first 70 tokens: two whole blocks (64 positions) are shareable.
  const std::vector<uint32_t> second = concat(std::span(first).first(70), random_tokens(15, 40));
  ASSERT_NE(first[70], second[70]);

  auto session_a = pooled_session(*engine);
  eval(*session_a, first);
  session_a->reset();  // publishes its three full blocks
  PoolStats stats = engine->pool_stats();
  EXPECT_EQ(stats.published_blocks, 3u);
  EXPECT_EQ(stats.unreferenced_blocks, 3u);
  EXPECT_EQ(stats.free_blocks, 13u);

  auto session_b = pooled_session(*engine);
  auto adopted = session_b->match_prefix(second);
  ASSERT_TRUE(adopted.ok()) << adopted.message();
  EXPECT_EQ(*adopted, 2 * kBlock);
  EXPECT_EQ(session_b->length(), 2 * kBlock);
  EXPECT_EQ(session_b->shared_blocks(), 2u);
  EXPECT_EQ(engine->pool_stats().unreferenced_blocks, 1u);

  const auto rest = static_cast<uint32_t>(second.size() - *adopted);
  const std::vector<float> shared = eval(*session_b, std::span(second).subspan(*adopted), rest);
  EXPECT_TRUE(bitwise_equal(rows_of(all_logits_private(*engine, second), *adopted, rest), shared));
}

TEST_F(EnginePoolTest, MatchPrefixLeavesOneTokenToEvaluate) {
  auto engine = open_pooled(8);
  const std::vector<uint32_t> tokens = random_tokens(16, 64);
  auto writer = pooled_session(*engine);
  eval(*writer, tokens);
  writer->reset();
  ASSERT_EQ(engine->pool_stats().published_blocks, 2u);

  auto reader = pooled_session(*engine);
  auto adopted = reader->match_prefix(tokens);  // all 64 published, but one must stay to evaluate
  ASSERT_TRUE(adopted.ok()) << adopted.message();
  EXPECT_EQ(*adopted, kBlock);
  EXPECT_TRUE(continues_like_private(*engine, *reader, tokens, kBlock));

  // Only empty pooled sessions adopt.
  EXPECT_FALSE(reader->match_prefix(tokens).ok());
  auto private_session = new_session(*engine);
  EXPECT_FALSE(private_session->match_prefix(tokens).ok());
}

TEST_F(EnginePoolTest, ExhaustionIsACleanErrorAndChangesNothing) {
  auto engine = open_pooled(4);  // 128 positions in all
  const std::vector<uint32_t> tokens = random_tokens(17, 128), other = random_tokens(18, 10);
  const std::span<const uint32_t> all(tokens);
  auto session_a = pooled_session(*engine);
  eval(*session_a, all.first(100));  // 4 blocks: the pool is full
  EXPECT_EQ(engine->pool_stats().free_blocks, 0u);

  auto session_b = pooled_session(*engine);
  std::vector<float> logits(vocab());
  const Status exhausted = session_b->eval(other, 1, logits.data());
  ASSERT_FALSE(exhausted.ok());
  EXPECT_NE(exhausted.message().find("exhausted"), std::string::npos) << exhausted.message();
  EXPECT_EQ(session_b->length(), 0u);

  // A can still use the room left in its last block; then it too runs out.
  eval(*session_a, all.subspan(100, 20));
  std::vector<float> many(10 * vocab());
  const Status a_exhausted = session_a->eval(random_tokens(19, 10), 10, many.data());
  ASSERT_FALSE(a_exhausted.ok());
  EXPECT_NE(a_exhausted.message().find("exhausted"), std::string::npos) << a_exhausted.message();
  EXPECT_EQ(session_a->length(), 120u);
  EXPECT_EQ(engine->pool_stats().free_blocks, 0u);

  // Unchanged: the rest of the sequence gives what a private session gives.
  EXPECT_TRUE(continues_like_private(*engine, *session_a, tokens, 120));
}

TEST_F(EnginePoolTest, BatchExhaustionChangesNoSession) {
  auto engine = open_pooled(5);
  const std::vector<uint32_t> a_tokens = random_tokens(20, 70), c_tokens = random_tokens(21, 40),
                              p_tokens = random_tokens(22, 20);
  auto session_a = pooled_session(*engine);
  auto session_c = pooled_session(*engine);
  auto session_p = new_session(*engine);            // a private session in the same batch
  eval(*session_a, std::span(a_tokens).first(40));  // 2 blocks
  eval(*session_p, std::span(p_tokens).first(10));
  const PoolStats before = engine->pool_stats();
  ASSERT_EQ(before.free_blocks, 3u);

  // A needs one more block (70 positions), C two (40): fits. Then asking C for 64 more fails.
  std::vector<float> a_logits(vocab()), c_logits(vocab()), p_logits(vocab());
  const std::vector<uint32_t> c_too_long = random_tokens(23, 104);  // 4 blocks
  const std::vector<BatchItem> too_much = {
      {session_p.get(), std::span(p_tokens).subspan(10), 1, p_logits.data()},
      {session_a.get(), std::span(a_tokens).subspan(40), 1, a_logits.data()},
      {session_c.get(), std::span(c_too_long), 1, c_logits.data()},
  };
  const Status status = engine->eval_batch(too_much);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("exhausted"), std::string::npos) << status.message();
  EXPECT_EQ(session_a->length(), 40u);
  EXPECT_EQ(session_c->length(), 0u);
  EXPECT_EQ(session_p->length(), 10u);
  EXPECT_EQ(engine->pool_stats().free_blocks, before.free_blocks);

  // The same batch within the pool works and matches private sessions.
  const std::vector<BatchItem> fits = {
      {session_p.get(), std::span(p_tokens).subspan(10), 1, p_logits.data()},
      {session_a.get(), std::span(a_tokens).subspan(40), 1, a_logits.data()},
      {session_c.get(), std::span(c_tokens), 1, c_logits.data()},
  };
  const Status ok = engine->eval_batch(fits);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_TRUE(bitwise_equal(rows_of(all_logits_private(*engine, a_tokens), 69, 1), a_logits));
  EXPECT_TRUE(bitwise_equal(rows_of(all_logits_private(*engine, c_tokens), 39, 1), c_logits));
  EXPECT_TRUE(bitwise_equal(rows_of(all_logits_private(*engine, p_tokens), 19, 1), p_logits));
}

TEST_F(EnginePoolTest, EvictsUnreferencedBlocksWhenFreeOnesRunOut) {
  auto engine = open_pooled(4);
  const std::vector<uint32_t> first = random_tokens(24, 100), second = random_tokens(25, 100);
  publish(*engine, first);  // the session's destruction publishes like reset
  PoolStats stats = engine->pool_stats();
  EXPECT_EQ(stats.published_blocks, 3u);
  EXPECT_EQ(stats.unreferenced_blocks, 3u);
  EXPECT_EQ(stats.free_blocks, 1u);
  EXPECT_EQ(stats.evictions, 0u);

  auto session = pooled_session(*engine);
  std::vector<float> logits = eval(*session, second, 100);  // 4 blocks: 1 free + 3 evicted
  stats = engine->pool_stats();
  EXPECT_EQ(stats.evictions, 3u);
  EXPECT_EQ(stats.published_blocks, 0u);
  EXPECT_EQ(stats.free_blocks, 0u);
  EXPECT_TRUE(bitwise_equal(all_logits_private(*engine, second), logits));

  // The evicted prefix is gone: nothing to adopt.
  session->reset();
  auto reader = adopting_session(*engine, first, 0);
}

TEST_F(EnginePoolTest, EvictionTakesLeavesBeforeTheirRoot) {
  auto engine = open_pooled(4);
  const std::vector<uint32_t> first = random_tokens(26, 100);
  publish(*engine, first);
  // Needing two blocks: the free one and one eviction, which must take the chain's leaf and
  // keep its first two blocks.
  {
    auto other = pooled_session(*engine);
    eval(*other, random_tokens(27, 40));
    EXPECT_EQ(engine->pool_stats().evictions, 1u);
  }
  auto reader = adopting_session(*engine, first, 2 * kBlock);
  EXPECT_TRUE(continues_like_private(*engine, *reader, first, 2 * kBlock));
}

TEST_F(EnginePoolTest, TruncateIntoSharedPrefixCopiesTheBlock) {
  auto engine = open_pooled(12);
  const std::vector<uint32_t> original = random_tokens(28, 100);
  publish(*engine, original);
  ASSERT_EQ(engine->pool_stats().published_blocks, 3u);

  auto session = adopting_session(*engine, original, 3 * kBlock);
  eval(*session, std::span(original).subspan(3 * kBlock));

  // Cut inside the second shared block, then write different tokens over the rest of it.
  ASSERT_TRUE(session->truncate(50).ok());
  EXPECT_EQ(session->length(), 50u);
  EXPECT_EQ(session->shared_blocks(), 1u);
  const std::vector<uint32_t> changed = concat(std::span(original).first(50), random_tokens(29, 40));
  EXPECT_TRUE(continues_like_private(*engine, *session, changed, 50));

  // The published blocks are intact: a third session adopting them gets the original logits.
  auto third = adopting_session(*engine, original, 3 * kBlock);
  EXPECT_TRUE(continues_like_private(*engine, *third, original, 96));
}

TEST_F(EnginePoolTest, TruncateIntoSharedPrefixWorksWithAFullPool) {
  // Every block in use: the cut frees the session's private tail, which must serve as the copy
  // of the cut shared block (truncating only ever gives blocks back).
  auto engine = open_pooled(4);
  const std::vector<uint32_t> original = random_tokens(34, 100);
  publish(*engine, original);
  auto session = adopting_session(*engine, original);
  eval(*session, std::span(original).subspan(3 * kBlock));
  ASSERT_EQ(engine->pool_stats().free_blocks, 0u);
  ASSERT_EQ(engine->pool_stats().unreferenced_blocks, 0u);

  const Status cut = session->truncate(50);
  ASSERT_TRUE(cut.ok()) << cut.message();
  EXPECT_EQ(session->shared_blocks(), 1u);
  const std::vector<uint32_t> changed = concat(std::span(original).first(50), random_tokens(35, 40));
  EXPECT_TRUE(continues_like_private(*engine, *session, changed, 50));
}

TEST_F(EnginePoolTest, TruncateIntoSharedPrefixFailsCleanlyWhenNothingIsFree) {
  auto engine = open_pooled(4);
  const std::vector<uint32_t> original = random_tokens(36, 100);
  publish(*engine, original);
  auto session = adopting_session(*engine, original);  // 3 shared blocks, no private one
  auto other = pooled_session(*engine);
  eval(*other, random_tokens(37, 5));  // takes the last free block
  ASSERT_EQ(engine->pool_stats().free_blocks, 0u);

  const Status cut = session->truncate(50);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.message().find("exhausted"), std::string::npos) << cut.message();
  EXPECT_EQ(session->length(), 3 * kBlock);
  EXPECT_EQ(session->shared_blocks(), 3u);

  other.reset();  // frees a block; the session continues as if nothing happened
  EXPECT_TRUE(continues_like_private(*engine, *session, original, 96));
}

TEST_F(EnginePoolTest, TruncateLetsGoOfLeavesBeforeTheCutBlock) {
  auto engine = open_pooled(5);
  const std::vector<uint32_t> original = random_tokens(40, 100);
  publish(*engine, original);
  auto session = adopting_session(*engine, original);
  ASSERT_TRUE(session->truncate(50).ok());  // copies block 1, lets go of blocks 1 and 2
  EXPECT_EQ(engine->pool_stats().unreferenced_blocks, 2u);
  // One eviction: it must take block 2 (a leaf), not block 1, whose child would be orphaned.
  auto other = pooled_session(*engine);
  eval(*other, random_tokens(41, 40));
  EXPECT_EQ(engine->pool_stats().evictions, 1u);
  auto reader = adopting_session(*engine, original, 2 * kBlock);
}

TEST_F(EnginePoolTest, IdenticalSequencesArePublishedOnce) {
  auto engine = open_pooled(12);
  const std::vector<uint32_t> tokens = random_tokens(38, 70);
  auto first = pooled_session(*engine), second = pooled_session(*engine);
  const std::vector<float> first_logits = eval(*first, tokens, 70);
  EXPECT_TRUE(bitwise_equal(first_logits, eval(*second, tokens, 70)));
  EXPECT_EQ(engine->pool_stats().free_blocks, 6u);
  first->reset();
  second->reset();  // its two full blocks duplicate the published ones: freed, not published again
  const PoolStats stats = engine->pool_stats();
  EXPECT_EQ(stats.published_blocks, 2u);
  EXPECT_EQ(stats.unreferenced_blocks, 2u);
  EXPECT_EQ(stats.free_blocks, 10u);
  auto reader = adopting_session(*engine, tokens, 2 * kBlock);
  EXPECT_TRUE(bitwise_equal(rows_of(first_logits, 64, 6), eval(*reader, std::span(tokens).subspan(64), 6)));
}

TEST_F(EnginePoolTest, PooledCapacityIsEnforced) {
  auto engine = open_pooled(8);
  auto session = new_session(*engine, [] {
    SessionOptions options = pooled_options();
    options.capacity = 40;
    return options;
  }());
  eval(*session, random_tokens(39, 40));
  std::vector<float> logits(vocab());
  const std::vector<uint32_t> one = {3};
  EXPECT_FALSE(session->eval(one, 1, logits.data()).ok());
  EXPECT_EQ(session->length(), 40u);
  EXPECT_EQ(engine->pool_stats().free_blocks, 6u);
}

TEST_F(EnginePoolTest, TruncateToASharedBlockBoundary) {
  auto engine = open_pooled(12);
  const std::vector<uint32_t> original = random_tokens(30, 100);
  publish(*engine, original);
  auto session = adopting_session(*engine, original);
  ASSERT_TRUE(session->truncate(kBlock).ok());  // keeps one whole shared block, no copy needed
  EXPECT_EQ(session->shared_blocks(), 1u);
  const std::vector<uint32_t> changed = concat(std::span(original).first(kBlock), random_tokens(31, 50));
  EXPECT_TRUE(continues_like_private(*engine, *session, changed, kBlock));
  session->reset();  // publishes the new branch beside the original one

  auto reader = adopting_session(*engine, original, 3 * kBlock);
  EXPECT_TRUE(continues_like_private(*engine, *reader, original, 96));
  auto branch_reader = adopting_session(*engine, changed, 2 * kBlock);
  EXPECT_TRUE(continues_like_private(*engine, *branch_reader, changed, 64));
}

TEST_F(EnginePoolTest, TruncateWithinPrivateTail) {
  auto engine = open_pooled(8);
  const std::vector<uint32_t> tokens = random_tokens(32, 100);
  auto session = pooled_session(*engine);
  eval(*session, tokens);
  const uint32_t free_before = engine->pool_stats().free_blocks;
  ASSERT_TRUE(session->truncate(70).ok());  // inside block 2: blocks 0..2 kept, block 3 freed
  EXPECT_EQ(engine->pool_stats().free_blocks, free_before + 1);
  EXPECT_EQ(session->shared_blocks(), 0u);
  const std::vector<uint32_t> changed = concat(std::span(tokens).first(70), random_tokens(33, 30));
  EXPECT_TRUE(continues_like_private(*engine, *session, changed, 70));
  ASSERT_TRUE(session->truncate(64).ok());  // a block boundary
  EXPECT_TRUE(continues_like_private(*engine, *session, tokens, 64));
  ASSERT_TRUE(session->truncate(0).ok());
  EXPECT_EQ(engine->pool_stats().free_blocks, 8u);
}

// ------------------------------------------------------------------ (f) batches

TEST_F(EngineTest, BatchMatchesEachSessionAlone) {
  const std::vector<size_t> prefix_lengths = {0, 10, 37};
  const std::vector<size_t> new_tokens = {5, 1, 40};
  const std::vector<uint32_t> logit_rows = {5, 1, 3};
  std::vector<std::vector<uint32_t>> sequences;
  std::vector<std::unique_ptr<Session>> batched, alone;
  for (size_t i = 0; i < 3; ++i) {
    sequences.push_back(random_tokens(40 + static_cast<uint32_t>(i), prefix_lengths[i] + new_tokens[i]));
    batched.push_back(new_session());
    alone.push_back(new_session());
    const auto prefix = std::span(sequences[i]).first(prefix_lengths[i]);
    if (!prefix.empty()) {
      eval(*batched[i], prefix);
      eval(*alone[i], prefix);
    }
  }
  std::vector<std::vector<float>> batch_logits(3);
  std::vector<BatchItem> items;
  for (size_t i = 0; i < 3; ++i) {
    batch_logits[i].resize(logit_rows[i] * vocab());
    items.push_back(
        {batched[i].get(), std::span(sequences[i]).subspan(prefix_lengths[i]), logit_rows[i], batch_logits[i].data()});
  }
  const Status status = engine_->eval_batch(items);
  ASSERT_TRUE(status.ok()) << status.message();
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(batched[i]->length(), sequences[i].size());
    EXPECT_TRUE(bitwise_equal(eval(*alone[i], std::span(sequences[i]).subspan(prefix_lengths[i]), logit_rows[i]),
                              batch_logits[i]));
  }
}

TEST_F(EngineTest, BatchRejectsDuplicatesAndBadItemsWithoutChanges) {
  auto first = new_session(), second = new_session();
  const std::vector<uint32_t> tokens = random_tokens(50, 6);
  std::vector<float> logits_a(vocab()), logits_b(vocab());
  const std::vector<BatchItem> duplicate = {
      {first.get(), std::span(tokens).first(3), 1, logits_a.data()},
      {second.get(), std::span(tokens).first(3), 1, logits_b.data()},
      {first.get(), std::span(tokens).subspan(3), 1, logits_b.data()},
  };
  const Status status = engine_->eval_batch(duplicate);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("twice"), std::string::npos) << status.message();
  EXPECT_EQ(first->length(), 0u);
  EXPECT_EQ(second->length(), 0u);

  // A bad item anywhere in the batch: nothing is evaluated.
  const std::vector<uint32_t> bad = {1, 999};
  const std::vector<BatchItem> one_bad = {
      {first.get(), std::span(tokens), 1, logits_a.data()},
      {second.get(), std::span(bad), 1, logits_b.data()},
  };
  EXPECT_FALSE(engine_->eval_batch(one_bad).ok());
  EXPECT_EQ(first->length(), 0u);
  EXPECT_EQ(second->length(), 0u);

  // Sessions of another engine are refused.
  auto other_engine = open_engine();
  auto foreign = new_session(*other_engine);
  const std::vector<BatchItem> mixed = {{foreign.get(), std::span(tokens), 1, logits_a.data()}};
  EXPECT_FALSE(engine_->eval_batch(mixed).ok());
  EXPECT_EQ(foreign->length(), 0u);
}

// ------------------------------------------------------------------ (g) multi-row logits

TEST_F(EngineTest, MultiRowLogitsEqualOneTokenAtATime) {
  const std::vector<uint32_t> tokens = random_tokens(60, 70);  // crosses two block boundaries
  auto session = new_session();
  const std::vector<float> rows = eval(*session, tokens, 70);

  auto stepwise = new_session();
  for (size_t t = 0; t < tokens.size(); ++t)
    ASSERT_TRUE(bitwise_equal(rows_of(rows, t, 1), eval(*stepwise, std::span(tokens).subspan(t, 1))))
        << "position " << t;

  auto last_only = new_session();
  EXPECT_TRUE(bitwise_equal(rows_of(rows, 69, 1), eval(*last_only, tokens, 1)));
  auto some = new_session();
  EXPECT_TRUE(bitwise_equal(rows_of(rows, 50, 20), eval(*some, tokens, 20)));
}

// The determinism contract on every kernel table this CPU runs, the reference (which multiplies
// FP32 activations) included: one position at a time, a reversed block table, a batch beside
// another session and split steps all give the plain evaluation's bits.
TEST_F(EngineTest, EveryKernelTableKeepsTheDeterminismContract) {
  const std::vector<uint32_t> tokens = random_tokens(90, kBlock + 9), other = random_tokens(91, 7);
  const auto rows = static_cast<uint32_t>(tokens.size());
  for (const kernels::KernelTable* table : kernels::available_kernel_tables()) {
    SCOPED_TRACE(table->name);
    EngineOptions options;
    options.kernels = table->name;
    auto engine = open_engine(options);
    ASSERT_NE(engine, nullptr);
    const std::vector<float> plain = all_logits_private(*engine, tokens);
    ASSERT_FALSE(plain.empty());

    auto stepwise = new_session(*engine);
    for (size_t t = 0; t < tokens.size(); ++t)
      ASSERT_TRUE(bitwise_equal(rows_of(plain, t, 1), eval(*stepwise, std::span(tokens).subspan(t, 1))))
          << "position " << t;

    auto scrambled = new_session(*engine, session_options(2 * kBlock, {1, 0}));
    EXPECT_TRUE(bitwise_equal(plain, eval(*scrambled, tokens, rows)));

    auto first = new_session(*engine), second = new_session(*engine);
    std::vector<float> batched(plain.size()), beside(other.size() * vocab());
    const std::vector<BatchItem> items = {{first.get(), tokens, rows, batched.data()},
                                          {second.get(), other, static_cast<uint32_t>(other.size()), beside.data()}};
    const Status status = engine->eval_batch(items);
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_TRUE(bitwise_equal(plain, batched));

    options.max_step_tokens = 5;
    auto stepped = open_engine(options);
    ASSERT_NE(stepped, nullptr);
    EXPECT_TRUE(bitwise_equal(plain, all_logits_private(*stepped, tokens)));
  }
}

// ------------------------------------------------------------------ stateless, sizes, steps

TEST_F(EngineTest, StatelessEqualsIncrementalDecode) {
  const std::vector<uint32_t> tokens = random_tokens(70, 75);
  std::vector<float> stateless(tokens.size() * vocab());
  const Status status = engine_->eval_stateless(tokens, static_cast<uint32_t>(tokens.size()), stateless.data());
  ASSERT_TRUE(status.ok()) << status.message();

  // Bitwise, not within a tolerance: the temporary cache rounds K/V to BF16 like a session's.
  auto session = new_session();
  for (size_t t = 0; t < tokens.size(); ++t)
    ASSERT_TRUE(bitwise_equal(rows_of(stateless, t, 1), eval(*session, std::span(tokens).subspan(t, 1))))
        << "position " << t;

  std::vector<float> last(vocab());
  ASSERT_TRUE(engine_->eval_stateless(tokens, 1, last.data()).ok());
  EXPECT_TRUE(bitwise_equal(rows_of(stateless, 74, 1), last));

  EXPECT_FALSE(engine_->eval_stateless(tokens, 1, nullptr).ok());  // an error, not a crash
  EXPECT_TRUE(engine_->eval_stateless({}, 0, nullptr).ok());
  EXPECT_FALSE(engine_->eval_stateless({}, 1, last.data()).ok());
  const std::vector<uint32_t> bad = {vocab()};
  EXPECT_FALSE(engine_->eval_stateless(bad, 1, last.data()).ok());
  const std::vector<uint32_t> too_long = random_tokens(71, engine_->config().context_length + 1);
  EXPECT_FALSE(engine_->eval_stateless(too_long, 1, last.data()).ok());
}

TEST_F(EngineTest, KvBytesPerTokenAndStorageSize) {
  const ModelConfig& config = engine_->config();
  const uint64_t per_token = uint64_t{config.num_layers} * 2 * config.num_kv_heads * config.head_dim * 2;
  EXPECT_EQ(config.kv_bytes_per_token(), per_token);
  EXPECT_EQ(per_token, 2u * 2 * 2 * 32 * 2);  // micro: 2 layers, K+V, 2 kv heads of 32, BF16

  // A separate backend on the same model: the engine's own is handed out read-only.
  auto backend = create_backend(BackendKind::Cpu, engine_->model());
  ASSERT_TRUE(backend.ok()) << backend.message();
  for (uint32_t capacity : {1u, 32u, 33u, 100u, 256u}) {
    const uint32_t blocks = (capacity + kBlock - 1) / kBlock;
    auto storage = (*backend)->create_kv_storage(blocks);
    ASSERT_TRUE(storage.ok()) << storage.message();
    EXPECT_EQ((*storage)->num_blocks(), blocks);
    EXPECT_EQ((*storage)->bytes(), uint64_t{blocks} * kBlock * per_token) << "capacity " << capacity;
  }
}

TEST_F(EngineTest, MaxStepTokensDoesNotChangeLogits) {
  auto stepped = open_engine(EngineOptions{.max_step_tokens = 5});
  ASSERT_NE(stepped, nullptr);
  const std::vector<uint32_t> tokens = random_tokens(80, 67);
  // One long eval with all logits (13+ steps, logits rows spread over steps).
  EXPECT_TRUE(bitwise_equal(all_logits_private(tokens), all_logits_private(*stepped, tokens)));

  // A batch whose rows straddle steps and items.
  std::vector<std::unique_ptr<Session>> sessions, reference;
  std::vector<std::vector<float>> outputs(3), expected(3);
  std::vector<BatchItem> items, reference_items;
  const std::vector<size_t> counts = {7, 3, 12};
  std::vector<std::vector<uint32_t>> sequences;
  for (size_t i = 0; i < 3; ++i) sequences.push_back(random_tokens(81 + static_cast<uint32_t>(i), counts[i]));
  for (size_t i = 0; i < 3; ++i) {
    sessions.push_back(new_session(*stepped));
    reference.push_back(new_session());
    outputs[i].resize(counts[i] * vocab());
    expected[i].resize(counts[i] * vocab());
    items.push_back({sessions[i].get(), sequences[i], static_cast<uint32_t>(counts[i]), outputs[i].data()});
    reference_items.push_back({reference[i].get(), sequences[i], static_cast<uint32_t>(counts[i]), expected[i].data()});
  }
  const Status stepped_status = stepped->eval_batch(items);
  ASSERT_TRUE(stepped_status.ok()) << stepped_status.message();
  const Status reference_status = engine_->eval_batch(reference_items);
  ASSERT_TRUE(reference_status.ok()) << reference_status.message();
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(bitwise_equal(expected[i], outputs[i])) << "item " << i;
}

}  // namespace
}  // namespace kipp
