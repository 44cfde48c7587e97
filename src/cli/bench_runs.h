// The timed parts of `kipp bench`: prefill of a prompt in one eval, decode one token at a time,
// and batched decode of several sequences through Engine::eval_batch. Tokens are pseudo-random
// ordinary (non-added) ids from a fixed seed, and decode feeds back the argmax, so a run is
// repeatable and needs no sampler. Progress goes to stderr.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/status.h"
#include "kernels/cpu/machine_probe.h"
#include "runtime/engine.h"

namespace kipp::cli {

// Rates of several timed runs.
struct RateSpread {
  double median = 0;
  double min = 0;
  double max = 0;
};

// Median, min and max of the rates of several runs.
RateSpread spread_of(std::vector<double> rates);

// `count` ids below the first added token (no special or control tokens), the same for the
// same `stream`.
std::vector<uint32_t> bench_tokens(const Engine& engine, uint32_t count, uint64_t stream);

// One untimed eval of `tokens` ids in a fresh session: faults the mapped weights in, so the
// first timed run does not pay for it.
Status warm_up(Engine& engine, uint32_t tokens);

struct PrefillRun {
  uint32_t tokens = 0;
  uint32_t repeats = 0;
  RateSpread tokens_per_second;
};

// `repeats` fresh sessions, each evaluating `tokens` ids in one eval (logits of the last only).
Expected<PrefillRun> run_prefill(Engine& engine, uint32_t tokens, uint32_t repeats);

struct DecodeRun {
  uint32_t prompt_tokens = 0;
  uint32_t generated_tokens = 0;
  RateSpread tokens_per_second;   // per token: 1 / each step's time
  double mean_tokens_per_second = 0;  // generated tokens / their total time
  double mean_positions = 0;      // positions attention saw per generated token, on average
  uint32_t session_capacity = 0;
  uint64_t session_kv_bytes = 0;
  // The passes of the probe given to run_decode, one after each token.
  std::optional<kernels::BandwidthResult> bandwidth_alongside;
};

// One session: the prompt, then `generate` single-token evals, each timed. With `alongside`,
// one pass of it after each token (BandwidthProbe::timed_pass_between_runs), so decode and
// bandwidth are measured in the same moments.
Expected<DecodeRun> run_decode(Engine& engine, uint32_t prompt_tokens, uint32_t generate,
                               kernels::BandwidthProbe* alongside);

struct BatchRun {
  uint32_t sequences = 0;
  uint32_t prompt_tokens = 0;
  uint32_t steps = 0;
  RateSpread tokens_per_second;  // aggregate: sequences / each step's time
};

// `sequences` private sessions with a prompt each (untimed), then `steps` eval_batch calls
// with one token per session, each timed.
Expected<BatchRun> run_batch(Engine& engine, uint32_t sequences, uint32_t prompt_tokens, uint32_t steps);

}  // namespace kipp::cli
