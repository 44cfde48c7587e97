#include "cli/bench_runs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "core/random.h"

namespace kipp::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kTokenSeed = 0x6b69707062656e63;  // "kippbenc"

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

uint32_t argmax(const std::vector<float>& logits) {
  return static_cast<uint32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Expected<std::unique_ptr<Session>> private_session(Engine& engine, uint32_t capacity) {
  SessionOptions options;
  options.capacity = capacity;
  return engine.create_session(options);
}

// A private session decoding its own sequence: the argmax of its last logits is its next token.
struct Sequence {
  std::unique_ptr<Session> session;
  std::vector<float> logits;
  uint32_t next = 0;
};

Expected<Sequence> start_sequence(Engine& engine, uint32_t prompt_tokens, uint32_t capacity, uint64_t stream) {
  Sequence sequence;
  KIPP_ASSIGN_OR_RETURN(sequence.session, private_session(engine, capacity));
  sequence.logits.resize(engine.vocab_size());
  KIPP_RETURN_IF_ERROR(sequence.session->eval(bench_tokens(engine, prompt_tokens, stream), 1, sequence.logits.data()));
  return sequence;
}

// Seconds of one eval of each sequence's next token, all in one call.
Expected<double> timed_step(Engine& engine, std::vector<Sequence>& sequences) {
  std::vector<BatchItem> items;
  for (Sequence& s : sequences) {
    s.next = argmax(s.logits);
    items.push_back(BatchItem{s.session.get(), std::span<const uint32_t>(&s.next, 1), 1, s.logits.data()});
  }
  const auto start = Clock::now();
  KIPP_RETURN_IF_ERROR(items.size() == 1 ? items[0].session->eval(items[0].tokens, 1, items[0].logits)
                                         : engine.eval_batch(items));
  return seconds_since(start);
}

}  // namespace

RateSpread spread_of(std::vector<double> rates) {
  RateSpread spread;
  if (rates.empty()) return spread;
  std::sort(rates.begin(), rates.end());
  const size_t n = rates.size();
  spread.median = n % 2 == 1 ? rates[n / 2] : 0.5 * (rates[n / 2 - 1] + rates[n / 2]);
  spread.min = rates.front();
  spread.max = rates.back();
  return spread;
}

std::vector<uint32_t> bench_tokens(const Engine& engine, uint32_t count, uint64_t stream) {
  const std::vector<int32_t>& types = engine.model().tokenizer().token_types;
  std::vector<uint32_t> ordinary;
  for (uint32_t id = 0; id < engine.vocab_size() && id < types.size(); ++id)
    if (types[id] == static_cast<int32_t>(TokenType::Normal)) ordinary.push_back(id);
  if (ordinary.empty()) ordinary.push_back(0);  // a vocabulary of added tokens only: any valid id
  std::vector<uint32_t> tokens(count);
  for (uint32_t i = 0; i < count; ++i) tokens[i] = ordinary[counter_random(kTokenSeed + stream, i) % ordinary.size()];
  return tokens;
}

Status warm_up(Engine& engine, uint32_t tokens) {
  KIPP_ASSIGN_OR_RETURN(auto session, private_session(engine, tokens));
  std::vector<float> logits(engine.vocab_size());
  return session->eval(bench_tokens(engine, tokens, 0), 1, logits.data());
}

Expected<PrefillRun> run_prefill(Engine& engine, uint32_t tokens, uint32_t repeats) {
  const std::vector<uint32_t> prompt = bench_tokens(engine, tokens, 0);
  std::vector<float> logits(engine.vocab_size());
  std::vector<double> rates;
  for (uint32_t r = 0; r < repeats; ++r) {
    KIPP_ASSIGN_OR_RETURN(auto session, private_session(engine, tokens));
    const auto start = Clock::now();
    KIPP_RETURN_IF_ERROR(session->eval(prompt, 1, logits.data()));
    const double seconds = seconds_since(start);
    rates.push_back(tokens / seconds);
    std::fprintf(stderr, "  prefill %u tokens, repeat %u/%u: %.3f s (%.1f tokens/s)\n", tokens, r + 1, repeats, seconds,
                 rates.back());
  }
  return PrefillRun{tokens, repeats, spread_of(std::move(rates))};
}

Expected<DecodeRuns> run_decode(Engine& engine, uint32_t prompt_tokens, uint32_t generate,
                                const std::vector<uint32_t>& batch_sizes,
                                std::unique_ptr<kernels::BandwidthProbe> alongside) {
  const uint32_t capacity = prompt_tokens + generate;
  DecodeRuns runs;
  DecodeRun& run = runs.decode;
  run.prompt_tokens = prompt_tokens;
  run.generated_tokens = generate;
  run.session_capacity = capacity;
  std::vector<Sequence> single;
  uint64_t stream = 0;  // every sequence its own prompt
  KIPP_ASSIGN_OR_RETURN(Sequence first, start_sequence(engine, prompt_tokens, capacity, stream++));
  run.session_kv_bytes = first.session->kv_storage_bytes();
  single.push_back(std::move(first));
  struct Batch {
    std::vector<Sequence> sequences;
    std::vector<double> rates, speedups;
    double seconds = 0;
  };
  std::vector<Batch> batches;
  for (const uint32_t size : batch_sizes) {
    if (size < 2) continue;
    Batch& batch = batches.emplace_back();
    for (uint32_t s = 0; s < size; ++s) {
      KIPP_ASSIGN_OR_RETURN(Sequence sequence, start_sequence(engine, prompt_tokens, capacity, stream++));
      batch.sequences.push_back(std::move(sequence));
    }
  }
  std::vector<double> rates;
  double total_seconds = 0;
  for (uint32_t t = 0; t < generate; ++t) {
    if (alongside != nullptr) {
      KIPP_ASSIGN_OR_RETURN(const double pass_seconds, alongside->timed_pass_between_runs());
      run.pass_gb_per_second.push_back(static_cast<double>(alongside->result().buffer_bytes) / pass_seconds / 1e9);
    }
    KIPP_ASSIGN_OR_RETURN(const double seconds, timed_step(engine, single));
    run.token_seconds.push_back(seconds);
    total_seconds += seconds;
    rates.push_back(1.0 / seconds);
    for (Batch& batch : batches) {
      KIPP_ASSIGN_OR_RETURN(const double step_seconds, timed_step(engine, batch.sequences));
      batch.seconds += step_seconds;
      batch.rates.push_back(static_cast<double>(batch.sequences.size()) / step_seconds);
      batch.speedups.push_back(batch.rates.back() / rates.back());
    }
  }
  std::fprintf(stderr, "  decode %u tokens after a %u-token prompt: %.3f s\n", generate, prompt_tokens, total_seconds);
  for (const Batch& batch : batches)
    std::fprintf(stderr, "  batch of %zu: %u steps in %.3f s, each in the round of a decode token\n",
                 batch.sequences.size(), generate, batch.seconds);
  if (alongside != nullptr) {
    run.bandwidth_alongside = alongside->result();
    std::fprintf(stderr, "  read bandwidth between the tokens: %.2f GB/s best, %.2f median\n",
                 run.bandwidth_alongside->best_gb_per_second, run.bandwidth_alongside->median_gb_per_second);
    alongside.reset();
  }
  run.tokens_per_second = spread_of(std::move(rates));
  run.mean_tokens_per_second = generate / total_seconds;
  // Token t (from 0) sits at position prompt + t and attends to prompt + t + 1 positions.
  run.mean_positions = prompt_tokens + (generate + 1) / 2.0;
  for (Batch& batch : batches)
    runs.batches.push_back(BatchRun{static_cast<uint32_t>(batch.sequences.size()), prompt_tokens, generate,
                                    spread_of(std::move(batch.rates)), spread_of(std::move(batch.speedups))});
  KIPP_ASSIGN_OR_RETURN(runs.memory_at_end, read_process_memory());
  return runs;
}

}  // namespace kipp::cli
