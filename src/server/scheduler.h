// The scheduler: one thread that owns the engine, every session and the K/V pool. HTTP threads
// only submit requests and read their channels (server/generation_request.h).
//
// Each step is ONE eval_batch over every active choice: the pending token of each decoding
// choice, plus prompt chunks (prefill_chunk tokens per choice, prefill_budget in all) of
// requests still being prefilled, so long prompts never stall decoding. Admission is FIFO while
// the active choices fit max_batch and the pool can hold every admitted request's worst case
// (prompt + max_tokens per choice), so a running request never runs out of K/V blocks.
//
// Prompt sharing: a request with n > 1 choices prefills the whole blocks of its prompt once
// (choice 0), publishes them to the pool and lets every choice adopt them (match_prefix); each
// choice then evaluates only the rest of the prompt. Blocks of finished sessions stay in the
// pool, so later requests with the same prefix adopt them too (usage.cached_tokens).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"
#include "runtime/engine.h"
#include "server/generation_request.h"
#include "server/metrics.h"
#include "server/server_options.h"

namespace kipp::server {

struct Rejection {
  enum class Reason { Invalid, TooLong, QueueFull, ShuttingDown };
  Reason reason = Reason::Invalid;
  std::string message;
  std::string param;  // the request field at fault, if any
};

struct Submission {
  std::shared_ptr<RequestChannel> channel;  // null when rejected
  std::optional<Rejection> rejection;
};

class Scheduler {
 public:
  // Opens the model with a pool of kv_pool_mib and starts the thread. `metrics` (may be null)
  // must outlive the scheduler.
  static Expected<std::unique_ptr<Scheduler>> create(const std::string& model_path, const SchedulerOptions& options,
                                                     Metrics* metrics);
  ~Scheduler();  // stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Checks the request against the context and the pool, then queues it (or rejects it).
  Submission submit(GenerationRequest request);
  // Ends every request (an error event each) and joins the thread. Idempotent.
  void stop();

  // Immutable facts any thread may read (the tokenizer is thread-safe).
  const Model& model() const { return engine_->model(); }
  const Tokenizer& tokenizer() const { return engine_->tokenizer(); }
  uint32_t context() const { return context_; }
  uint32_t pool_blocks() const { return pool_blocks_; }
  uint32_t max_batch() const { return options_.max_batch; }

 private:
  struct Choice;
  struct Active;
  struct Queued {
    std::shared_ptr<RequestChannel> channel;
    GenerationRequest request;
    uint32_t max_tokens = 0;      // effective, per choice
    uint32_t shared_until = 0;    // n > 1: prompt positions choice 0 prefills for all
    uint32_t private_blocks = 0;  // worst case per choice beyond the shared blocks
    uint32_t worst_blocks = 0;    // shared + n * private
  };
  struct StepRow;
  struct Batch;

  Scheduler(std::unique_ptr<Engine> engine, const SchedulerOptions& options, uint32_t context, Metrics* metrics);
  void run();
  void admit_from_queue();
  void start(Queued queued);
  Status fork(Active& active);
  void step();
  void add_decoding(Batch& batch);
  void add_prompt_chunks(Batch& batch);
  std::future<void> prepare_masks(const Batch& batch);
  void fail_batch(const Batch& batch, const Status& evaluated);
  std::vector<Active*> sample_tokens(const Batch& batch);
  void end_completed(const std::vector<Active*>& touched);
  void accept(Active& active, Choice& choice, SampledToken token);
  void deliver(Active& active, Choice& choice, std::string_view text, Event& delta, bool last);
  void finish_choice(Active& active, Choice& choice, const char* reason, bool flush);
  void fail(Active& active, const std::string& message);  // error event; ended after the step
  void end_request(Active& active, std::optional<Event> final_event);
  void drop_expired_and_cancelled();
  void publish_gauges(size_t queue_depth);

  std::unique_ptr<Engine> engine_;
  SchedulerOptions options_;
  uint32_t context_;
  uint32_t pool_blocks_;
  Metrics* metrics_;
  std::vector<uint32_t> stop_tokens_;
  std::shared_ptr<const grammar::TokenVocabulary> grammar_vocabulary_;  // built once, for every grammar

  std::mutex mutex_;  // guards queue_ and stopping_
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  bool stopping_ = false;

  // Scheduler thread only.
  std::list<std::unique_ptr<Active>> active_;
  uint32_t active_choices_ = 0;
  uint32_t reserved_blocks_ = 0;
  std::vector<float> logits_;  // max_batch rows of vocab floats
  std::thread thread_;
};

}  // namespace kipp::server
