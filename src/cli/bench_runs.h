// The timed parts of `kipp bench`: prefill of a prompt in one eval, and decode one token at a
// time alternated with batched decode of several sequences through Engine::eval_batch. Tokens
// are pseudo-random ordinary (non-added) ids from a fixed seed, and decode feeds back the
// argmax, so a run is repeatable and needs no sampler. Progress goes to stderr.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/process_stats.h"
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
  RateSpread tokens_per_second;       // per token: 1 / each step's time
  double mean_tokens_per_second = 0;  // generated tokens / their total time
  double mean_positions = 0;          // positions attention saw per generated token, on average
  uint32_t session_capacity = 0;
  uint64_t session_kv_bytes = 0;
  // The passes of the probe given to run_decode, one before each token.
  std::optional<kernels::BandwidthResult> bandwidth_alongside;
  // Per token, in order: its time, and with bandwidth_alongside the rate of the pass just
  // before it (1e9 bytes/s), so each token can be set against the same moment of the host.
  std::vector<double> token_seconds;
  std::vector<double> pass_gb_per_second;
};

struct BatchRun {
  uint32_t sequences = 0;
  uint32_t prompt_tokens = 0;
  uint32_t steps = 0;
  RateSpread tokens_per_second;  // aggregate: sequences / each step's time
  // Per step: its aggregate rate over the rate of the decode token taken just before it.
  RateSpread speedup;
};

struct DecodeRuns {
  DecodeRun decode;
  std::vector<BatchRun> batches;  // in the order of batch_sizes
  ProcessMemory memory_at_end;    // every session still open, the probe freed
};

// One session with a prompt of `prompt_tokens` and, per size in `batch_sizes` of 2 or more,
// that many more, each with its own prompt of the same length (untimed); then `generate` rounds
// of: one pass of `alongside` if given (BandwidthProbe::timed_pass_between_runs), one decode
// token of the single session (timed), and per batch one eval_batch step of one token per
// session (timed). Taken in turn, bandwidth, decode and batches see the same moments of a
// shared host, so their ratios hold when its bandwidth moves; each decode token starts after
// the pass's pause (the pool's threads asleep, as for a lone request) and the batch steps right
// after it (threads awake, as in a busy server). `alongside` is freed after the rounds and the
// memory read before the sessions close.
Expected<DecodeRuns> run_decode(Engine& engine, uint32_t prompt_tokens, uint32_t generate,
                                const std::vector<uint32_t>& batch_sizes,
                                std::unique_ptr<kernels::BandwidthProbe> alongside);

}  // namespace kipp::cli
