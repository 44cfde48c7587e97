// The server's scheduler (src/server/scheduler.h) driven directly on the micro GGUF (random
// weights, the small test tokenizer, context 256): batched requests give exactly what each gives
// alone (and what runtime/generator.h gives), n > 1 choices share the prompt, prefix reuse,
// cancelling frees the slot, seeds, a full queue, a K/V pool too small for a request, and
// admission waiting for K/V blocks.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/generator.h"
#include "server/scheduler.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/tokenizer_fixtures.h"

namespace kipp::server {
namespace {

using testing::engine_model_path;
namespace small = testing::small;
using namespace std::chrono_literals;

std::vector<uint32_t> random_prompt(uint32_t seed, size_t count) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> id(0, 255);  // byte tokens: never a stop token
  std::vector<uint32_t> tokens(count);
  for (uint32_t& t : tokens) t = id(rng);
  return tokens;
}

// Greedy, with the stop token masked so that the output length is exactly max_tokens.
GenerationRequest greedy_request(std::vector<uint32_t> prompt, uint32_t max_tokens, uint32_t n = 1) {
  GenerationRequest request;
  request.prompt = std::move(prompt);
  request.max_tokens = max_tokens;
  request.n = n;
  request.sampling.temperature = 0;
  request.sampling.logit_bias = {{small::kImStart, -1e30f}};
  return request;
}

struct Outcome {
  std::vector<std::string> text;  // per choice
  std::vector<std::string> finish;
  std::vector<uint32_t> tokens;  // reported tokens per choice (logprobs on)
  std::optional<Usage> usage;
  std::string error;
  bool timed_out = false;
};

Outcome collect(RequestChannel& channel, uint32_t n, std::chrono::seconds limit = 60s) {
  Outcome out;
  out.text.resize(n);
  out.finish.resize(n);
  out.tokens.resize(n);
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    auto event = channel.pop(100ms);
    if (!event) continue;
    switch (event->kind) {
      case Event::Kind::Delta:
        out.text[event->choice] += event->reasoning + event->content;
        out.tokens[event->choice] += static_cast<uint32_t>(event->tokens.size());
        break;
      case Event::Kind::Finish: out.finish[event->choice] = event->finish_reason; break;
      case Event::Kind::Done: out.usage = event->usage; return out;
      case Event::Kind::Error: out.error = event->error; return out;
    }
  }
  out.timed_out = true;
  return out;
}

class ServerScheduler : public ::testing::Test {
 protected:
  std::unique_ptr<Scheduler> make(SchedulerOptions options = {}) {
    options.verify_content_hash = false;
    auto created = Scheduler::create(engine_model_path(), options, &metrics_);
    EXPECT_TRUE(created.ok()) << created.message();
    return created.ok() ? std::move(created).value() : nullptr;
  }

  std::shared_ptr<RequestChannel> submit(Scheduler& scheduler, GenerationRequest request) {
    Submission submission = scheduler.submit(std::move(request));
    EXPECT_FALSE(submission.rejection.has_value()) << (submission.rejection ? submission.rejection->message : "");
    return submission.channel;
  }

  Outcome run_alone(Scheduler& scheduler, GenerationRequest request) {
    const uint32_t n = request.n;
    auto channel = submit(scheduler, std::move(request));
    return channel ? collect(*channel, n) : Outcome{};
  }

  Metrics metrics_;
};

TEST_F(ServerScheduler, BatchedRequestsGiveExactlyTheirIsolatedGreedyOutputs) {
  auto scheduler = make();
  ASSERT_TRUE(scheduler);
  const std::vector<std::vector<uint32_t>> prompts = {random_prompt(1, 5), random_prompt(2, 70), random_prompt(3, 33),
                                                      random_prompt(4, 1)};
  const std::vector<uint32_t> lengths = {40, 12, 25, 60};
  // Each alone, through the single-session generator: the reference.
  auto engine = Engine::open(engine_model_path());
  ASSERT_TRUE(engine.ok()) << engine.message();
  std::vector<std::string> reference;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto session = (*engine)->create_session();
    ASSERT_TRUE(session.ok());
    GenerateOptions options;
    options.sampling = greedy_request({}, 1).sampling;
    options.max_tokens = lengths[i];
    auto result = generate(**engine, **session, prompts[i], options);
    ASSERT_TRUE(result.ok()) << result.message();
    reference.push_back(result->text);
  }
  // All at once: decoded together, prompts prefilled in chunks between decode steps.
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (size_t i = 0; i < prompts.size(); ++i)
    channels.push_back(submit(*scheduler, greedy_request(prompts[i], lengths[i])));
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(channels[i]);
    const Outcome out = collect(*channels[i], 1);
    ASSERT_TRUE(out.usage) << out.error;
    EXPECT_EQ(out.text[0], reference[i]) << "request " << i;
    EXPECT_EQ(out.finish[0], "length");
    EXPECT_EQ(out.usage->completion_tokens, lengths[i]);
    EXPECT_EQ(out.usage->prompt_tokens, prompts[i].size());
  }
}

TEST_F(ServerScheduler, ChoicesShareThePromptAndFinishedBlocksAreReused) {
  auto scheduler = make();
  ASSERT_TRUE(scheduler);
  const std::vector<uint32_t> prompt = random_prompt(7, 75);  // two whole blocks shared, 11 tokens each
  const Outcome single = run_alone(*scheduler, greedy_request(prompt, 20));
  ASSERT_TRUE(single.usage) << single.error;
  // The first request's blocks are in the pool now: the next one adopts its two whole blocks.
  const Outcome pair = run_alone(*scheduler, greedy_request(prompt, 20, 2));
  ASSERT_TRUE(pair.usage) << pair.error;
  EXPECT_EQ(pair.usage->cached_tokens, 64u);
  EXPECT_EQ(pair.usage->prompt_tokens, 75u);
  EXPECT_EQ(pair.usage->completion_tokens, 40u);
  // Greedy choices of one prompt are the single choice's output, prompt shared or not.
  EXPECT_EQ(pair.text[0], single.text[0]);
  EXPECT_EQ(pair.text[1], single.text[0]);

  // A fresh prompt with n = 3 goes through choice 0's shared prefill and the fork.
  const std::vector<uint32_t> other = random_prompt(8, 100);
  const Outcome three = run_alone(*scheduler, greedy_request(other, 9, 3));
  ASSERT_TRUE(three.usage) << three.error;
  EXPECT_EQ(three.usage->cached_tokens, 0u);
  const Outcome one = run_alone(*scheduler, greedy_request(other, 9));
  ASSERT_TRUE(one.usage) << one.error;
  EXPECT_EQ(one.usage->cached_tokens, 96u);
  for (const std::string& text : three.text) EXPECT_EQ(text, one.text[0]);
}

TEST_F(ServerScheduler, SameSeedSameOutputAndChoicesDiffer) {
  auto scheduler = make();
  ASSERT_TRUE(scheduler);
  const auto sampled = [&](uint64_t seed) {
    GenerationRequest request = greedy_request(random_prompt(9, 12), 30, 2);
    request.sampling.temperature = 1.0f;
    request.sampling.seed = seed;
    request.logprobs = true;
    request.sampling.top_logprobs = 3;
    return run_alone(*scheduler, std::move(request));
  };
  const Outcome a = sampled(42), b = sampled(42), c = sampled(43);
  ASSERT_TRUE(a.usage && b.usage && c.usage);
  EXPECT_EQ(a.text, b.text);
  EXPECT_NE(a.text[0], a.text[1]);  // choice i samples with seed + i
  EXPECT_EQ(a.text[1], c.text[0]);  // ... so seed 43's first choice is seed 42's second
  EXPECT_EQ(a.tokens[0], 30u);      // one report per generated token
}

TEST_F(ServerScheduler, CancellingFreesTheSlotForTheNextRequest) {
  SchedulerOptions options;
  options.max_batch = 1;
  // One engine thread: no pool worker polls a core while this thread has to cancel the first
  // request.
  options.threads = 1;
  auto scheduler = make(options);
  ASSERT_TRUE(scheduler);
  // The micro model decodes the first request's 240 tokens in about 5 ms, so this thread, woken
  // by its first token, can be too late to cancel it (it then ends Done, as it should). Such an
  // attempt proves nothing about cancelling and is made again; the second request must get the
  // slot every time.
  bool cancelled_in_time = false;
  for (uint32_t attempt = 0; attempt < 5 && !cancelled_in_time; ++attempt) {
    auto first = submit(*scheduler, greedy_request(random_prompt(10 + 2 * attempt, 8), 240));
    ASSERT_TRUE(first);
    ASSERT_TRUE(first->pop(10s).has_value());  // generating now, holding the only slot
    auto second = submit(*scheduler, greedy_request(random_prompt(11 + 2 * attempt, 8), 5));
    ASSERT_TRUE(second);
    first->cancel();
    const Outcome out = collect(*second, 1, 20s);
    ASSERT_TRUE(out.usage) << out.error;
    EXPECT_EQ(out.usage->completion_tokens, 5u);
    bool done = false;
    for (auto event = first->pop(0ms); event; event = first->pop(0ms)) done = done || event->kind == Event::Kind::Done;
    cancelled_in_time = !done;
  }
  EXPECT_TRUE(cancelled_in_time) << "every cancelled request still ended with a Done event";
}

TEST_F(ServerScheduler, AFullQueueRejectsWithQueueFull) {
  SchedulerOptions options;
  options.max_batch = 1;
  options.max_queue = 1;
  auto scheduler = make(options);
  ASSERT_TRUE(scheduler);
  auto running = submit(*scheduler, greedy_request(random_prompt(12, 8), 240));
  ASSERT_TRUE(running);
  ASSERT_TRUE(running->pop(10s).has_value());
  auto waiting = submit(*scheduler, greedy_request(random_prompt(13, 8), 4));
  ASSERT_TRUE(waiting);
  Submission refused = scheduler->submit(greedy_request(random_prompt(14, 8), 4));
  ASSERT_TRUE(refused.rejection.has_value());
  EXPECT_EQ(refused.rejection->reason, Rejection::Reason::QueueFull);
  running->cancel();
  EXPECT_TRUE(collect(*waiting, 1).usage.has_value());
}

TEST_F(ServerScheduler, RequestsTheContextOrPoolCannotHoldAreRejectedUpFront) {
  SchedulerOptions options;
  options.kv_pool_mib = 1;  // 64 blocks of 32 positions on the micro model; context 256 = 8 blocks
  options.max_batch = 16;
  auto scheduler = make(options);
  ASSERT_TRUE(scheduler);
  EXPECT_EQ(scheduler->context(), 256u);
  EXPECT_EQ(scheduler->pool_blocks(), 64u);
  Submission too_long = scheduler->submit(greedy_request(random_prompt(15, 256), 1));
  ASSERT_TRUE(too_long.rejection);
  EXPECT_EQ(too_long.rejection->reason, Rejection::Reason::TooLong);
  EXPECT_NE(too_long.rejection->message.find("256 tokens"), std::string::npos) << too_long.rejection->message;
  Submission over_context = scheduler->submit(greedy_request(random_prompt(16, 200), 100));
  ASSERT_TRUE(over_context.rejection);
  EXPECT_EQ(over_context.rejection->param, "max_tokens");
  // Nine choices of a full context need 72 blocks: more than the pool holds.
  Submission over_pool = scheduler->submit(greedy_request(random_prompt(17, 10), 246, 9));
  ASSERT_TRUE(over_pool.rejection);
  EXPECT_EQ(over_pool.rejection->param, "n");
  Submission bad_id = scheduler->submit(greedy_request({small::kVocab}, 1));
  ASSERT_TRUE(bad_id.rejection);
  EXPECT_EQ(bad_id.rejection->param, "prompt");
}

TEST_F(ServerScheduler, AdmissionWaitsUntilThePoolCanHoldTheWorstCase) {
  SchedulerOptions options;
  options.kv_pool_mib = 1;  // 64 blocks
  options.max_batch = 16;
  auto scheduler = make(options);
  ASSERT_TRUE(scheduler);
  // 8 choices x 8 blocks: the whole pool. The next request fits the batch but not the pool.
  auto big = submit(*scheduler, greedy_request(random_prompt(18, 10), 246, 8));
  auto small_one = submit(*scheduler, greedy_request(random_prompt(19, 4), 3));
  ASSERT_TRUE(big && small_one);
  bool big_done = false;
  const auto drain_big = [&] {
    for (auto event = big->pop(0ms); event; event = big->pop(0ms)) {
      ASSERT_NE(event->kind, Event::Kind::Error) << event->error;
      if (event->kind == Event::Kind::Done) big_done = true;
    }
  };
  const auto deadline = Clock::now() + 60s;
  while (!big_done && Clock::now() < deadline) {
    if (small_one->pop(1ms)) {  // the small request started: the big one must be over by now
      drain_big();
      ASSERT_TRUE(big_done) << "admitted before the pool had room";
      break;
    }
    drain_big();
  }
  ASSERT_TRUE(big_done);
  const Outcome out = collect(*small_one, 1);
  ASSERT_TRUE(out.usage) << out.error;
  EXPECT_EQ(out.usage->completion_tokens, 3u);
}

TEST_F(ServerScheduler, WithoutMaxTokensTheDefaultCapApplies) {
  SchedulerOptions options;
  options.default_max_tokens = 5;
  auto scheduler = make(options);
  ASSERT_TRUE(scheduler);
  GenerationRequest request = greedy_request(random_prompt(23, 8), 1);
  request.max_tokens.reset();
  const Outcome out = run_alone(*scheduler, std::move(request));
  ASSERT_TRUE(out.usage) << out.error;
  EXPECT_EQ(out.usage->completion_tokens, 5u);
  EXPECT_EQ(out.finish[0], "length");
}

TEST_F(ServerScheduler, StopStringsEndAChoiceAndAreNotEmitted) {
  auto scheduler = make();
  ASSERT_TRUE(scheduler);
  const std::vector<uint32_t> prompt = random_prompt(20, 6);
  const Outcome free_run = run_alone(*scheduler, greedy_request(prompt, 40));
  ASSERT_TRUE(free_run.usage);
  const std::string& text = free_run.text[0];
  ASSERT_GE(text.size(), 6u);
  GenerationRequest request = greedy_request(prompt, 40);
  request.stop = {text.substr(3, 2)};
  const Outcome stopped = run_alone(*scheduler, std::move(request));
  ASSERT_TRUE(stopped.usage);
  EXPECT_EQ(stopped.finish[0], "stop");
  EXPECT_EQ(stopped.text[0], text.substr(0, text.find(text.substr(3, 2))));
}

TEST_F(ServerScheduler, StoppingEndsEveryRequestWithAnError) {
  auto scheduler = make();
  ASSERT_TRUE(scheduler);
  auto channel = submit(*scheduler, greedy_request(random_prompt(21, 8), 240));
  ASSERT_TRUE(channel);
  scheduler->stop();
  const Outcome out = collect(*channel, 1, 10s);
  EXPECT_FALSE(out.timed_out);
  EXPECT_TRUE(out.usage.has_value() || !out.error.empty());
  Submission after = scheduler->submit(greedy_request(random_prompt(22, 8), 4));
  ASSERT_TRUE(after.rejection);
  EXPECT_EQ(after.rejection->reason, Rejection::Reason::ShuttingDown);
}

}  // namespace
}  // namespace kipp::server
