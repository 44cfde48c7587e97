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

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

uint32_t argmax(const std::vector<float>& logits) {
  return static_cast<uint32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Expected<std::unique_ptr<Session>> private_session(Engine& engine, uint32_t capacity) {
  SessionOptions options;
  options.capacity = capacity;
  return engine.create_session(options);
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
    std::fprintf(stderr, "  prefill %u tokens, repeat %u/%u: %.3f s (%.1f tokens/s)\n", tokens, r + 1, repeats,
                 seconds, rates.back());
  }
  return PrefillRun{tokens, repeats, spread_of(std::move(rates))};
}

Expected<DecodeRun> run_decode(Engine& engine, uint32_t prompt_tokens, uint32_t generate,
                               kernels::BandwidthProbe* alongside) {
  DecodeRun run;
  run.prompt_tokens = prompt_tokens;
  run.generated_tokens = generate;
  run.session_capacity = prompt_tokens + generate;
  KIPP_ASSIGN_OR_RETURN(auto session, private_session(engine, run.session_capacity));
  run.session_kv_bytes = session->kv_storage_bytes();
  std::vector<float> logits(engine.vocab_size());
  KIPP_RETURN_IF_ERROR(session->eval(bench_tokens(engine, prompt_tokens, 0), 1, logits.data()));
  std::vector<double> rates;
  double total_seconds = 0;
  for (uint32_t t = 0; t < generate; ++t) {
    const uint32_t next = argmax(logits);
    const auto start = Clock::now();
    KIPP_RETURN_IF_ERROR(session->eval(std::span<const uint32_t>(&next, 1), 1, logits.data()));
    const double seconds = seconds_since(start);
    total_seconds += seconds;
    rates.push_back(1.0 / seconds);
    if (alongside != nullptr) KIPP_RETURN_IF_ERROR(alongside->timed_pass_between_runs());
  }
  std::fprintf(stderr, "  decode %u tokens after a %u-token prompt: %.3f s\n", generate, prompt_tokens, total_seconds);
  if (alongside != nullptr) {
    run.bandwidth_alongside = alongside->result();
    std::fprintf(stderr, "  read bandwidth between the tokens: %.2f GB/s best, %.2f median\n",
                 run.bandwidth_alongside->best_gb_per_second, run.bandwidth_alongside->median_gb_per_second);
  }
  run.tokens_per_second = spread_of(std::move(rates));
  run.mean_tokens_per_second = generate / total_seconds;
  // Token t (from 0) sits at position prompt + t and attends to prompt + t + 1 positions.
  run.mean_positions = prompt_tokens + (generate + 1) / 2.0;
  return run;
}

Expected<BatchRun> run_batch(Engine& engine, uint32_t sequences, uint32_t prompt_tokens, uint32_t steps) {
  const uint32_t vocab = engine.vocab_size();
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<std::vector<float>> logits(sequences, std::vector<float>(vocab));
  for (uint32_t s = 0; s < sequences; ++s) {
    KIPP_ASSIGN_OR_RETURN(auto session, private_session(engine, prompt_tokens + steps));
    KIPP_RETURN_IF_ERROR(session->eval(bench_tokens(engine, prompt_tokens, 1 + s), 1, logits[s].data()));
    sessions.push_back(std::move(session));
  }
  std::vector<uint32_t> next(sequences);
  std::vector<BatchItem> items(sequences);
  std::vector<double> rates;
  double total_seconds = 0;
  for (uint32_t step = 0; step < steps; ++step) {
    for (uint32_t s = 0; s < sequences; ++s) {
      next[s] = argmax(logits[s]);
      items[s] = BatchItem{sessions[s].get(), std::span<const uint32_t>(&next[s], 1), 1, logits[s].data()};
    }
    const auto start = Clock::now();
    KIPP_RETURN_IF_ERROR(engine.eval_batch(items));
    const double seconds = seconds_since(start);
    total_seconds += seconds;
    rates.push_back(sequences / seconds);
  }
  std::fprintf(stderr, "  batch of %u: %u steps in %.3f s\n", sequences, steps, total_seconds);
  return BatchRun{sequences, prompt_tokens, steps, spread_of(std::move(rates))};
}

}  // namespace kipp::cli
