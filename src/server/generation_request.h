// What the HTTP side hands the scheduler (a tokenized, validated request) and what it gets back:
// a per-request channel of events (text deltas with token log-probabilities, per-choice finish,
// the final usage, or an error). The channel is the only state both threads touch.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "sampling/sampler.h"

namespace kipp::server {

using Clock = std::chrono::steady_clock;

struct GenerationRequest {
  std::vector<uint32_t> prompt;
  uint32_t n = 1;                      // choices sharing the prompt
  std::optional<uint32_t> max_tokens;  // per choice; none: SchedulerOptions::default_max_tokens
  SamplingParams sampling;             // choice i samples with seed sampling.seed + i
  std::vector<std::string> stop;
  bool logprobs = false;         // report each token's logprob (and sampling.top_logprobs alternatives)
  bool split_reasoning = false;  // a leading <think>...</think> goes to reasoning text
  // Qwen3 tool calls: <tool_call> blocks in the content become tool-call events (after the
  // think splitter); at most max_tool_calls of them (then the choice ends).
  bool parse_tool_calls = false;
  uint32_t max_tool_calls = UINT32_MAX;
  std::vector<std::string> tool_names;  // the names a call may have (empty: any)
  // Constrained decoding: every choice's tokens are masked to this grammar (null: free).
  grammar::GrammarPtr grammar;
  Clock::time_point arrival = Clock::now();
};

struct TokenAlternative {
  std::string bytes;  // the token's raw bytes (may be part of a UTF-8 character)
  float logprob = 0;
};

struct TokenReport {
  std::string bytes;
  float logprob = 0;
  std::vector<TokenAlternative> top;
};

struct Usage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_tokens = 0;  // prompt tokens adopted from the prefix cache
  double queue_ms = 0;         // arrival to admission
  double prompt_ms = 0;        // admission to the first sampled token
  double generation_ms = 0;    // first sampled token to the end
};

enum class ErrorKind { Internal, Timeout };

struct Event {
  enum class Kind { Delta, Finish, Done, Error };
  Kind kind = Kind::Delta;
  uint32_t choice = 0;
  std::string content;              // Delta
  std::string reasoning;            // Delta
  std::vector<TokenReport> tokens;  // Delta, with logprobs on
  // Delta of a tool call (parse_tool_calls): the first delta of call tool_call_index carries its
  // id and name, later ones fragments of its arguments (JSON text).
  std::optional<uint32_t> tool_call_index;
  std::string tool_call_id;
  std::string tool_call_name;
  std::string tool_call_arguments;
  std::string finish_reason;                   // Finish: "stop", "length" or "tool_calls"
  Usage usage;                                 // Done
  ErrorKind error_kind = ErrorKind::Internal;  // Error (the request is over)
  std::string error;                           // Error
};

// Scheduler pushes, one HTTP thread pops. cancel() is how the HTTP side says the client is gone.
class RequestChannel {
 public:
  void push(Event event) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
    }
    ready_.notify_one();
  }

  // The next event, or none when `wait` passes without one.
  template <class Duration>
  std::optional<Event> pop(Duration wait) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!ready_.wait_for(lock, wait, [&] { return !events_.empty(); })) return std::nullopt;
    Event event = std::move(events_.front());
    events_.pop_front();
    return event;
  }

  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Event> events_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace kipp::server
