// The C API (include/kipp.h) over the micro model: results equal the C++ engine's bit for bit,
// size queries follow the header, and every failure returns its documented status with a
// message in kipp_last_error instead of throwing or aborting.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kipp.h"
#include "runtime/engine.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/tokenizer_fixtures.h"

namespace kipp {
namespace {

using testing::TempDir;
namespace small = testing::small;

constexpr uint32_t kVocab = small::kVocab;
constexpr uint32_t kPoolBlocks = 8;

// The micro model with the small hand-made byte-level tokenizer (the engine builds a
// tokenizer on open, so the vocabulary must be a real byte-level one).
Status write_micro_model(const std::string& path) { return testing::engine_blueprint().write(path); }

// Deterministic in-vocabulary ids.
std::vector<uint32_t> some_tokens(size_t count, uint32_t seed = 7) {
  std::vector<uint32_t> tokens(count);
  for (size_t i = 0; i < count; ++i) tokens[i] = static_cast<uint32_t>((seed + i * 13) % kVocab);
  return tokens;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A failure's status, with the message it left behind checked to be present.
::testing::AssertionResult failed_with(kipp_status status, kipp_status expected) {
  if (status != expected)
    return ::testing::AssertionFailure() << "status " << status << ", expected " << expected << " ("
                                         << kipp_last_error() << ")";
  if (std::strlen(kipp_last_error()) == 0) return ::testing::AssertionFailure() << "kipp_last_error() is empty";
  return ::testing::AssertionSuccess() << kipp_last_error();
}

// KIPP_ERROR_INVALID_ARGUMENT with a message naming the null argument.
::testing::AssertionResult null_named(kipp_status status, const std::string& argument) {
  if (status != KIPP_ERROR_INVALID_ARGUMENT)
    return ::testing::AssertionFailure() << "status " << status << " for null " << argument;
  if (std::string(kipp_last_error()).find(argument + " is null") == std::string::npos)
    return ::testing::AssertionFailure() << "'" << kipp_last_error() << "' does not name " << argument;
  return ::testing::AssertionSuccess();
}

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status written = write_micro_model(path_);
    ASSERT_TRUE(written.ok()) << written.message();
    kipp_model_options options;
    kipp_model_options_init(&options);
    options.pool_blocks = kPoolBlocks;
    ASSERT_EQ(kipp_model_open(path_.c_str(), &options, &model_), KIPP_OK) << kipp_last_error();
  }
  void TearDown() override {
    for (kipp_session* session : sessions_) kipp_session_destroy(session);
    kipp_model_destroy(model_);
  }

  kipp_session* new_session(uint32_t capacity = 0, bool pooled = false) {
    kipp_session* session = nullptr;
    EXPECT_EQ(kipp_session_create(model_, capacity, pooled ? 1 : 0, &session), KIPP_OK) << kipp_last_error();
    if (session != nullptr) sessions_.push_back(session);
    return session;
  }

  // The C++ engine's logits for `tokens` evaluated in one fresh session (last `rows` positions).
  std::vector<float> cpp_logits(const std::vector<uint32_t>& tokens, uint32_t rows = 1) {
    std::vector<float> logits(size_t{rows} * kVocab);
    auto engine = Engine::open(path_);
    if (!engine.ok()) {
      ADD_FAILURE() << engine.message();
      return logits;
    }
    auto session = (*engine)->create_session();
    if (!session.ok()) {
      ADD_FAILURE() << session.message();
      return logits;
    }
    const Status status = (*session)->eval(tokens, rows, logits.data());
    EXPECT_TRUE(status.ok()) << status.message();
    return logits;
  }

  std::vector<float> logits_row() const { return std::vector<float>(kVocab); }

  TempDir dir_;
  std::string path_ = dir_.file("micro.gguf");
  kipp_model* model_ = nullptr;
  std::vector<kipp_session*> sessions_;
};

TEST_F(CApiTest, ModelFactsComeFromTheGguf) {
  EXPECT_EQ(kipp_model_vocab_size(model_), kVocab);
  EXPECT_EQ(kipp_model_context_length(model_), 256u);
  EXPECT_EQ(kipp_model_eos_token(model_), 1u);
}

TEST_F(CApiTest, OptionsInitGivesTheDocumentedDefaults) {
  kipp_model_options options;
  std::memset(&options, 0xAB, sizeof options);
  kipp_model_options_init(&options);
  EXPECT_EQ(options.backend, KIPP_BACKEND_CPU);
  EXPECT_EQ(options.pool_blocks, 0u);
  EXPECT_EQ(options.max_step_tokens, 128u);
  EXPECT_EQ(options.verify_content_hash, 1);
}

TEST_F(CApiTest, TokenizeAndDetokenizeRoundTripWithSizeQueries) {
  const std::string text = "<|im_start|> the<think>";  // special tokens parsed
  size_t count = 0;
  ASSERT_EQ(kipp_tokenize(model_, text.data(), text.size(), nullptr, 0, &count), KIPP_OK) << kipp_last_error();
  ASSERT_EQ(count, 3u);
  std::vector<uint32_t> ids(count);
  ASSERT_EQ(kipp_tokenize(model_, text.data(), text.size(), ids.data(), ids.size(), &count), KIPP_OK);
  EXPECT_EQ(ids, (std::vector<uint32_t>{small::kImStart, small::kSpaceThe, small::kThink}));

  // A short buffer gets a prefix; the count is still the full one.
  uint32_t first = 99;
  ASSERT_EQ(kipp_tokenize(model_, text.data(), text.size(), &first, 1, &count), KIPP_OK);
  EXPECT_EQ(first, small::kImStart);
  EXPECT_EQ(count, 3u);

  size_t bytes = 0;
  ASSERT_EQ(kipp_detokenize(model_, ids.data(), ids.size(), nullptr, 0, &bytes), KIPP_OK) << kipp_last_error();
  ASSERT_EQ(bytes, text.size());  // no NUL counted
  std::string decoded(bytes, '\0');
  ASSERT_EQ(kipp_detokenize(model_, ids.data(), ids.size(), decoded.data(), decoded.size(), &bytes), KIPP_OK);
  EXPECT_EQ(decoded, text);
  char prefix[4] = {'x', 'x', 'x', 'x'};
  ASSERT_EQ(kipp_detokenize(model_, ids.data(), ids.size(), prefix, 3, &bytes), KIPP_OK);
  EXPECT_EQ(std::string(prefix, 4), "<|ix");
  EXPECT_EQ(bytes, text.size());
}

TEST_F(CApiTest, EmptyTextTokenizesToNothing) {
  size_t count = 5;
  ASSERT_EQ(kipp_tokenize(model_, nullptr, 0, nullptr, 0, &count), KIPP_OK) << kipp_last_error();
  EXPECT_EQ(count, 0u);
  size_t bytes = 5;
  ASSERT_EQ(kipp_detokenize(model_, nullptr, 0, nullptr, 0, &bytes), KIPP_OK) << kipp_last_error();
  EXPECT_EQ(bytes, 0u);
}

TEST_F(CApiTest, EvalEqualsTheCppSessionBitwise) {
  const auto tokens = some_tokens(37);
  kipp_session* session = new_session();
  auto logits = logits_row();
  ASSERT_EQ(kipp_session_eval(session, tokens.data(), tokens.size(), logits.data()), KIPP_OK) << kipp_last_error();
  EXPECT_EQ(kipp_session_length(session), 37u);
  EXPECT_EQ(kipp_session_capacity(session), 256u);
  EXPECT_TRUE(same_bits(logits, cpp_logits(tokens)));
}

TEST_F(CApiTest, EvalOfNoTokensIsANoOp) {
  kipp_session* session = new_session();
  ASSERT_EQ(kipp_session_eval(session, nullptr, 0, nullptr), KIPP_OK) << kipp_last_error();
  EXPECT_EQ(kipp_session_length(session), 0u);
}

TEST_F(CApiTest, EvalNWritesTheLastRowsInOrder) {
  const auto tokens = some_tokens(9);
  kipp_session* session = new_session();
  std::vector<float> logits(4 * kVocab);
  ASSERT_EQ(kipp_session_eval_n(session, tokens.data(), tokens.size(), 4, logits.data()), KIPP_OK) << kipp_last_error();
  EXPECT_TRUE(same_bits(logits, cpp_logits(tokens, 4)));
  // Row 3 is the last position: what kipp_session_eval gives for the same tokens.
  kipp_session* other = new_session();
  auto last = logits_row();
  ASSERT_EQ(kipp_session_eval(other, tokens.data(), tokens.size(), last.data()), KIPP_OK);
  EXPECT_TRUE(same_bits(std::vector<float>(logits.begin() + 3 * kVocab, logits.end()), last));
}

TEST_F(CApiTest, EvalTextEqualsEvalOfItsTokens) {
  kipp_session* by_text = new_session();
  auto logits = logits_row();
  ASSERT_EQ(kipp_session_eval_text(by_text, "<|im_start|> the", logits.data()), KIPP_OK) << kipp_last_error();
  EXPECT_EQ(kipp_session_length(by_text), 2u);
  EXPECT_TRUE(same_bits(logits, cpp_logits({small::kImStart, small::kSpaceThe})));
}

TEST_F(CApiTest, BatchEqualsSeparateEvals) {
  const auto first_tokens = some_tokens(5, 3);
  const auto second_tokens = some_tokens(40, 11);
  kipp_session* first = new_session();
  kipp_session* second = new_session(0, true);
  auto first_logits = logits_row();
  std::vector<float> second_logits(2 * kVocab);
  const kipp_batch_item items[] = {
      {first, first_tokens.data(), first_tokens.size(), 1, first_logits.data()},
      {second, second_tokens.data(), second_tokens.size(), 2, second_logits.data()},
  };
  ASSERT_EQ(kipp_eval_batch(model_, items, 2), KIPP_OK) << kipp_last_error();
  EXPECT_EQ(kipp_session_length(first), 5u);
  EXPECT_EQ(kipp_session_length(second), 40u);
  EXPECT_TRUE(same_bits(first_logits, cpp_logits(first_tokens)));
  EXPECT_TRUE(same_bits(second_logits, cpp_logits(second_tokens, 2)));
  EXPECT_EQ(kipp_eval_batch(model_, nullptr, 0), KIPP_OK) << "an empty batch is a no-op";
}

TEST_F(CApiTest, TruncateThenReevaluateGivesTheSameLogits) {
  const auto tokens = some_tokens(20);
  kipp_session* session = new_session();
  auto whole = logits_row();
  ASSERT_EQ(kipp_session_eval(session, tokens.data(), tokens.size(), whole.data()), KIPP_OK);
  ASSERT_EQ(kipp_session_truncate(session, 6), KIPP_OK) << kipp_last_error();
  EXPECT_EQ(kipp_session_length(session), 6u);
  auto again = logits_row();
  ASSERT_EQ(kipp_session_eval(session, tokens.data() + 6, tokens.size() - 6, again.data()), KIPP_OK);
  EXPECT_TRUE(same_bits(whole, again));

  kipp_session_reset(session);
  EXPECT_EQ(kipp_session_length(session), 0u);
  auto fresh = logits_row();
  ASSERT_EQ(kipp_session_eval(session, tokens.data(), tokens.size(), fresh.data()), KIPP_OK);
  EXPECT_TRUE(same_bits(whole, fresh));
}

TEST_F(CApiTest, MatchPrefixAdoptsTheBlocksAnotherPooledSessionPublished) {
  const auto tokens = some_tokens(70);  // two whole 32-token blocks and a tail
  kipp_session* writer = new_session(0, true);
  auto expected = logits_row();
  ASSERT_EQ(kipp_session_eval(writer, tokens.data(), tokens.size(), expected.data()), KIPP_OK) << kipp_last_error();
  kipp_session_reset(writer);  // publishes its full blocks

  kipp_session* reader = new_session(0, true);
  uint32_t adopted = 0;
  ASSERT_EQ(kipp_session_match_prefix(reader, tokens.data(), tokens.size(), &adopted), KIPP_OK) << kipp_last_error();
  EXPECT_EQ(adopted, 64u);
  EXPECT_EQ(kipp_session_length(reader), 64u);
  auto logits = logits_row();
  ASSERT_EQ(kipp_session_eval(reader, tokens.data() + adopted, tokens.size() - adopted, logits.data()), KIPP_OK);
  EXPECT_TRUE(same_bits(logits, expected));

  // Nothing published matches other tokens.
  kipp_session* stranger = new_session(0, true);
  const auto other = some_tokens(70, 5);
  ASSERT_EQ(kipp_session_match_prefix(stranger, other.data(), other.size(), &adopted), KIPP_OK);
  EXPECT_EQ(adopted, 0u);
}

TEST_F(CApiTest, LastErrorIsPerThread) {
  EXPECT_TRUE(failed_with(kipp_session_truncate(nullptr, 0), KIPP_ERROR_INVALID_ARGUMENT));
  std::string other_thread_error = "unset";
  std::thread([&] { other_thread_error = kipp_last_error(); }).join();
  EXPECT_EQ(other_thread_error, "");
  EXPECT_NE(std::string(kipp_last_error()), "");
}

// ------------------------------------------------------------------ failures

TEST(CApiOpen, MissingFileFails) {
  kipp_model_options options;
  kipp_model_options_init(&options);
  kipp_model* model = reinterpret_cast<kipp_model*>(1);
  EXPECT_TRUE(failed_with(kipp_model_open("/nonexistent/kipp/model.gguf", &options, &model), KIPP_ERROR_FAILED));
  EXPECT_EQ(model, nullptr);
  EXPECT_NE(std::string(kipp_last_error()).find("/nonexistent/kipp/model.gguf"), std::string::npos)
      << kipp_last_error();
}

TEST(CApiOpen, NullArgumentsAndBadOptionsAreInvalid) {
  kipp_model_options options;
  kipp_model_options_init(&options);
  kipp_model* model = nullptr;
  EXPECT_TRUE(failed_with(kipp_model_open(nullptr, &options, &model), KIPP_ERROR_INVALID_ARGUMENT));
  EXPECT_NE(std::string(kipp_last_error()).find("path"), std::string::npos);
  EXPECT_TRUE(failed_with(kipp_model_open("x.gguf", nullptr, &model), KIPP_ERROR_INVALID_ARGUMENT));
  EXPECT_NE(std::string(kipp_last_error()).find("options"), std::string::npos);
  EXPECT_TRUE(failed_with(kipp_model_open("x.gguf", &options, nullptr), KIPP_ERROR_INVALID_ARGUMENT));
  EXPECT_NE(std::string(kipp_last_error()).find("out"), std::string::npos);
  // As a C caller could store it (C++ cannot name an enum value outside the enum's range).
  const int unknown_backend = 7;
  static_assert(sizeof options.backend == sizeof unknown_backend);
  std::memcpy(&options.backend, &unknown_backend, sizeof unknown_backend);
  EXPECT_TRUE(failed_with(kipp_model_open("x.gguf", &options, &model), KIPP_ERROR_INVALID_ARGUMENT));
  EXPECT_NE(std::string(kipp_last_error()).find("backend 7"), std::string::npos);
}

TEST(CApiOpen, NullHandlesAreHarmlessWhereNoStatusIsReturned) {
  kipp_model_options_init(nullptr);
  kipp_model_destroy(nullptr);
  kipp_session_destroy(nullptr);
  kipp_session_reset(nullptr);
  EXPECT_EQ(kipp_model_vocab_size(nullptr), 0u);
  EXPECT_EQ(kipp_model_context_length(nullptr), 0u);
  EXPECT_EQ(kipp_model_eos_token(nullptr), 0u);
  EXPECT_EQ(kipp_session_length(nullptr), 0u);
  EXPECT_EQ(kipp_session_capacity(nullptr), 0u);
}

using CApiErrors = CApiTest;

TEST_F(CApiErrors, NullArgumentsAreInvalidAndNamed) {
  kipp_session* session = new_session();
  uint32_t ids[2] = {2, 3};
  size_t count = 0;
  float logits[kVocab];
  uint32_t adopted = 0;
  kipp_session* unused = nullptr;
  EXPECT_TRUE(null_named(kipp_tokenize(nullptr, "a", 1, ids, 2, &count), "model"));
  EXPECT_TRUE(null_named(kipp_tokenize(model_, nullptr, 1, ids, 2, &count), "text"));
  EXPECT_TRUE(null_named(kipp_tokenize(model_, "a", 1, nullptr, 2, &count), "ids"));
  EXPECT_TRUE(null_named(kipp_tokenize(model_, "a", 1, ids, 2, nullptr), "count"));
  EXPECT_EQ(std::string(kipp_last_error()), "kipp_tokenize: count is null");
  EXPECT_TRUE(null_named(kipp_detokenize(nullptr, ids, 2, nullptr, 0, &count), "model"));
  EXPECT_TRUE(null_named(kipp_detokenize(model_, nullptr, 2, nullptr, 0, &count), "ids"));
  EXPECT_TRUE(null_named(kipp_detokenize(model_, ids, 2, nullptr, 4, &count), "text"));
  EXPECT_TRUE(null_named(kipp_detokenize(model_, ids, 2, nullptr, 0, nullptr), "bytes"));
  EXPECT_TRUE(null_named(kipp_session_create(nullptr, 0, 0, &unused), "model"));
  EXPECT_TRUE(null_named(kipp_session_create(model_, 0, 0, nullptr), "out"));
  EXPECT_TRUE(null_named(kipp_session_eval(nullptr, ids, 2, logits), "session"));
  EXPECT_TRUE(null_named(kipp_session_eval(session, nullptr, 2, logits), "tokens"));
  EXPECT_TRUE(null_named(kipp_session_eval(session, ids, 2, nullptr), "logits"));
  EXPECT_TRUE(null_named(kipp_session_eval_n(nullptr, ids, 2, 1, logits), "session"));
  EXPECT_TRUE(null_named(kipp_session_eval_n(session, ids, 2, 1, nullptr), "logits"));
  EXPECT_TRUE(null_named(kipp_session_eval_text(nullptr, "a", logits), "session"));
  EXPECT_TRUE(null_named(kipp_session_eval_text(session, nullptr, logits), "text"));
  EXPECT_TRUE(null_named(kipp_session_eval_text(session, "hello", nullptr), "logits"));
  EXPECT_TRUE(null_named(kipp_session_truncate(nullptr, 0), "session"));
  EXPECT_TRUE(null_named(kipp_session_match_prefix(nullptr, ids, 2, &adopted), "session"));
  EXPECT_TRUE(null_named(kipp_session_match_prefix(session, nullptr, 2, &adopted), "tokens"));
  EXPECT_TRUE(null_named(kipp_session_match_prefix(session, ids, 2, nullptr), "adopted"));
  EXPECT_TRUE(null_named(kipp_eval_batch(nullptr, nullptr, 0), "model"));
  EXPECT_TRUE(null_named(kipp_eval_batch(model_, nullptr, 1), "items"));
  const kipp_batch_item no_logits{session, ids, 2, 1, nullptr};
  EXPECT_TRUE(null_named(kipp_eval_batch(model_, &no_logits, 1), "logits"));
  EXPECT_EQ(kipp_session_length(session), 0u) << "no failed call changed the session";
}

TEST_F(CApiErrors, BadIdsAreInvalidAndLeaveTheSessionUnchanged) {
  kipp_session* session = new_session(0, true);
  const uint32_t bad[] = {2, kVocab};
  auto logits = logits_row();
  EXPECT_TRUE(failed_with(kipp_session_eval(session, bad, 2, logits.data()), KIPP_ERROR_INVALID_ARGUMENT));
  EXPECT_NE(std::string(kipp_last_error()).find("token id 274 at index 1"), std::string::npos) << kipp_last_error();
  EXPECT_TRUE(failed_with(kipp_session_eval_n(session, bad, 2, 1, logits.data()), KIPP_ERROR_INVALID_ARGUMENT));
  uint32_t adopted = 0;
  EXPECT_TRUE(failed_with(kipp_session_match_prefix(session, bad, 2, &adopted), KIPP_ERROR_INVALID_ARGUMENT));
  size_t bytes = 0;
  EXPECT_TRUE(failed_with(kipp_detokenize(model_, bad, 2, nullptr, 0, &bytes), KIPP_ERROR_INVALID_ARGUMENT));
  const kipp_batch_item item{session, bad, 2, 1, logits.data()};
  EXPECT_TRUE(failed_with(kipp_eval_batch(model_, &item, 1), KIPP_ERROR_INVALID_ARGUMENT));
  EXPECT_NE(std::string(kipp_last_error()).find("item 0"), std::string::npos) << kipp_last_error();
  EXPECT_EQ(kipp_session_length(session), 0u);
}

TEST_F(CApiErrors, BadCountsAndOptionsAreInvalid) {
  kipp_session* session = new_session();
  const auto tokens = some_tokens(3);
  std::vector<float> logits(4 * kVocab);
  EXPECT_TRUE(
      failed_with(kipp_session_eval_n(session, tokens.data(), 3, 4, logits.data()), KIPP_ERROR_INVALID_ARGUMENT));
  EXPECT_TRUE(failed_with(kipp_session_truncate(session, 1), KIPP_ERROR_INVALID_ARGUMENT));
  kipp_session* unused = nullptr;
  EXPECT_TRUE(failed_with(kipp_session_create(model_, 257, 0, &unused), KIPP_ERROR_INVALID_ARGUMENT));
  EXPECT_NE(std::string(kipp_last_error()).find("257"), std::string::npos) << kipp_last_error();

  kipp_model_options options;
  kipp_model_options_init(&options);  // no pool
  kipp_model* unpooled = nullptr;
  ASSERT_EQ(kipp_model_open(path_.c_str(), &options, &unpooled), KIPP_OK) << kipp_last_error();
  EXPECT_TRUE(failed_with(kipp_session_create(unpooled, 0, 1, &unused), KIPP_ERROR_INVALID_ARGUMENT));
  EXPECT_EQ(unused, nullptr);
  kipp_model_destroy(unpooled);
}

TEST_F(CApiErrors, BatchRefusesForeignAndRepeatedSessions) {
  kipp_session* session = new_session();
  const auto tokens = some_tokens(2);
  auto logits = logits_row();
  const kipp_batch_item twice[] = {{session, tokens.data(), 2, 1, logits.data()},
                                   {session, tokens.data(), 2, 1, logits.data()}};
  EXPECT_TRUE(failed_with(kipp_eval_batch(model_, twice, 2), KIPP_ERROR_INVALID_ARGUMENT));
  EXPECT_NE(std::string(kipp_last_error()).find("twice"), std::string::npos) << kipp_last_error();
  const kipp_batch_item no_session{nullptr, tokens.data(), 2, 1, logits.data()};
  EXPECT_TRUE(failed_with(kipp_eval_batch(model_, &no_session, 1), KIPP_ERROR_INVALID_ARGUMENT));

  kipp_model_options options;
  kipp_model_options_init(&options);
  kipp_model* other = nullptr;
  ASSERT_EQ(kipp_model_open(path_.c_str(), &options, &other), KIPP_OK) << kipp_last_error();
  const kipp_batch_item foreign{session, tokens.data(), 2, 1, logits.data()};
  EXPECT_TRUE(failed_with(kipp_eval_batch(other, &foreign, 1), KIPP_ERROR_INVALID_ARGUMENT));
  EXPECT_NE(std::string(kipp_last_error()).find("another model"), std::string::npos) << kipp_last_error();
  kipp_model_destroy(other);
  EXPECT_EQ(kipp_session_length(session), 0u);
}

TEST_F(CApiErrors, OverCapacityFailsAndLeavesTheSessionUnchanged) {
  kipp_session* session = new_session(8);
  const auto tokens = some_tokens(9);
  auto logits = logits_row();
  ASSERT_EQ(kipp_session_eval(session, tokens.data(), 5, logits.data()), KIPP_OK) << kipp_last_error();
  EXPECT_TRUE(failed_with(kipp_session_eval(session, tokens.data() + 5, 4, logits.data()), KIPP_ERROR_FAILED));
  EXPECT_NE(std::string(kipp_last_error()).find("capacity is 8"), std::string::npos) << kipp_last_error();
  EXPECT_EQ(kipp_session_length(session), 5u);
}

TEST_F(CApiErrors, ExhaustedPoolFails) {
  const auto tokens = some_tokens((kPoolBlocks - 2) * 32);
  auto logits = logits_row();
  ASSERT_EQ(kipp_session_eval(new_session(0, true), tokens.data(), tokens.size(), logits.data()), KIPP_OK)
      << kipp_last_error();
  kipp_session* starved = new_session(0, true);  // three blocks asked, two left
  EXPECT_TRUE(failed_with(kipp_session_eval(starved, tokens.data(), 3 * 32, logits.data()), KIPP_ERROR_FAILED));
  EXPECT_NE(std::string(kipp_last_error()).find("exhausted"), std::string::npos) << kipp_last_error();
  EXPECT_EQ(kipp_session_length(starved), 0u);
}

TEST_F(CApiErrors, MatchPrefixNeedsAPooledEmptySession) {
  const auto tokens = some_tokens(3);
  uint32_t adopted = 0;
  EXPECT_TRUE(failed_with(kipp_session_match_prefix(new_session(), tokens.data(), 3, &adopted), KIPP_ERROR_FAILED));
  kipp_session* pooled = new_session(0, true);
  auto logits = logits_row();
  ASSERT_EQ(kipp_session_eval(pooled, tokens.data(), 3, logits.data()), KIPP_OK);
  EXPECT_TRUE(failed_with(kipp_session_match_prefix(pooled, tokens.data(), 3, &adopted), KIPP_ERROR_FAILED));
}

TEST_F(CApiErrors, InvalidUtf8IsAnInvalidArgument) {
  const char text[] = "ab\xff";
  size_t count = 0;
  EXPECT_TRUE(failed_with(kipp_tokenize(model_, text, 3, nullptr, 0, &count), KIPP_ERROR_INVALID_ARGUMENT));
  kipp_session* session = new_session();
  auto logits = logits_row();
  EXPECT_TRUE(failed_with(kipp_session_eval_text(session, text, logits.data()), KIPP_ERROR_INVALID_ARGUMENT));
}

}  // namespace
}  // namespace kipp
