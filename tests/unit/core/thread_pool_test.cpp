#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <stdexcept>
#include <vector>

#include "runtime/engine.h"
#include "unit/helpers/gguf_blueprint.h"

namespace kipp {
namespace {

TEST(ThreadPool, RangesCoverEveryIndexOnceInOrder) {
  for (size_t threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (size_t count : {0, 1, 2, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(count);
      std::vector<std::pair<size_t, size_t>> ranges(threads, {0, 0});
      pool.parallel_for(count, [&](size_t thread, size_t begin, size_t end) {
        ranges[thread] = {begin, end};
        for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " threads, count " << count;
      size_t expected_begin = 0;  // thread ranges are contiguous and ascending
      for (const auto& [begin, end] : ranges) {
        if (begin == end) continue;
        EXPECT_EQ(begin, expected_begin);
        expected_begin = end;
      }
      if (count > 1) {
        EXPECT_EQ(expected_begin, count);
      }
    }
  }
}

TEST(ThreadPool, ManyConsecutiveLoopsOnOnePool) {
  ThreadPool pool(2);
  std::atomic<size_t> total{0};
  for (int loop = 0; loop < 2000; ++loop)
    pool.parallel_for(10, [&](size_t, size_t begin, size_t end) { total += end - begin; });
  EXPECT_EQ(total.load(), 20000u);
}

TEST(ThreadPool, AThrowingRangeIsRethrownAfterTheOthersFinishAndThePoolStaysUsable) {
  ThreadPool pool(3);
  for (size_t thrower : {0u, 1u, 2u}) {  // the caller's range, then each worker's
    std::atomic<size_t> finished{0};
    EXPECT_THROW(pool.parallel_for(3,
                                   [&](size_t, size_t begin, size_t) {
                                     if (begin == thrower) throw std::runtime_error("range failed");
                                     ++finished;
                                   }),
                 std::runtime_error);
    EXPECT_EQ(finished.load(), 2u) << "thrower " << thrower;
  }
  std::atomic<size_t> total{0};
  pool.parallel_for(30, [&](size_t, size_t begin, size_t end) { total += end - begin; });
  EXPECT_EQ(total.load(), 30u);
}

// The thread count splits products by output rows and attention by (tile, kv head): logits are
// bitwise the same. 5 and 8 threads leave a decode step fewer attention items than threads.
TEST(EngineThreads, LogitsDoNotDependOnTheThreadCount) {
  std::mt19937 random(7);
  std::uniform_int_distribution<uint32_t> id(0, testing::engine_model_config().vocab_size - 1);
  std::vector<uint32_t> tokens(70);
  for (uint32_t& token : tokens) token = id(random);
  const uint32_t next = id(random);
  std::vector<std::vector<float>> results;
  for (uint32_t threads : {1u, 2u, 3u, 5u, 8u}) {
    EngineOptions options;
    options.threads = threads;
    auto engine = Engine::open(testing::engine_model_path(), options);
    ASSERT_TRUE(engine.ok()) << engine.message();
    auto session = (*engine)->create_session();
    ASSERT_TRUE(session.ok()) << session.message();
    const size_t vocab = (*engine)->vocab_size();
    std::vector<float> logits((tokens.size() + 1) * vocab);
    const Status evaluated = (*session)->eval(tokens, static_cast<uint32_t>(tokens.size()), logits.data());
    ASSERT_TRUE(evaluated.ok()) << evaluated.message();
    const Status decoded = (*session)->eval({&next, 1}, 1, logits.data() + tokens.size() * vocab);
    ASSERT_TRUE(decoded.ok()) << decoded.message();
    results.push_back(std::move(logits));
  }
  for (size_t i = 1; i < results.size(); ++i) EXPECT_EQ(results[0], results[i]) << "thread count #" << i;
}

}  // namespace
}  // namespace kipp
