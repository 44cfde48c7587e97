// The one sampling core (CLI and server): logits of one position in, one token out, with its
// log-probability and the top alternatives. One Sampler per sequence: it owns the sequence's
// random state and its recent-token window, so a sequence's output depends only on its own
// seed and tokens, never on what else is batched alongside.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kipp {

inline constexpr uint32_t kPenaltyWindow = 64;  // tokens the penalties look back over

struct SamplingParams {
  float temperature = 1.0f;                            // 0: greedy (argmax, ties to the lowest id)
  uint32_t top_k = 0;                                  // 0: off; larger than the vocabulary: off
  float top_p = 1.0f;                                  // nucleus mass kept, (0, 1]
  float min_p = 0.0f;                                  // drop tokens below min_p * p(best), [0, 1]
  float repetition_penalty = 1.0f;                     // > 0; CTRL-style: positive logits / r, negative * r
  float frequency_penalty = 0.0f;                      // OpenAI: minus count * frequency_penalty
  float presence_penalty = 0.0f;                       // OpenAI: minus presence_penalty if seen
  std::vector<std::pair<uint32_t, float>> logit_bias;  // added to the raw logits first
  uint64_t seed = 0;
  uint32_t top_logprobs = 0;  // alternatives reported with each token (0..20)

  // Ranges checked against the vocabulary (ids in logit_bias, finite values).
  Status validate(uint32_t vocab_size) const;
};

struct TokenLogprob {
  uint32_t id = 0;
  float logprob = 0;  // log-softmax of the raw logits (before bias, penalties, temperature)
};

struct SampledToken {
  uint32_t id = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;  // the top_logprobs most likely, best first (never a -inf one)
};

class Sampler {
 public:
  static Expected<Sampler> create(const SamplingParams& params, uint32_t vocab_size);

  // Records tokens already in the sequence (the prompt) in the penalty window.
  void observe(std::span<const uint32_t> tokens);
  // Picks the next token from one position's logits (vocab_size floats) and records it.
  // NaN or +inf logits are an error naming the first offending id; -inf masks a token
  // (probability 0), and all -inf is an error. The order of operations is in sampler.cpp.
  Expected<SampledToken> sample(std::span<const float> logits);

  const SamplingParams& params() const { return params_; }

 private:
  Sampler(const SamplingParams& params, uint32_t vocab_size);

  SamplingParams params_;
  uint32_t vocab_size_;
  std::mt19937_64 rng_;
  std::vector<uint32_t> window_;  // the last kPenaltyWindow tokens, oldest first
  struct Candidate {
    double value;  // working logit, then unnormalized probability (double: no finite input overflows)
    uint32_t id;
  };
  std::vector<Candidate> candidates_;  // vocab_size entries of scratch, sized once at creation
  // Ids whose working value differs from their logit (biased or penalized), with that value.
  std::vector<std::pair<uint32_t, double>> touched_;

  // The steps of sample(), in the order sampler.cpp describes. Counts are of candidates_'s
  // leading entries, the candidates still kept.
  std::vector<TokenLogprob> top_alternatives(std::span<const float> logits, double lse);
  void adjust(std::span<const float> logits);
  uint32_t greedy(std::span<const float> logits);
  uint32_t draw(std::span<const float> logits);
  uint32_t scaled_candidates(std::span<const float> logits);
  uint32_t weigh(uint32_t n);
  double total_weight(uint32_t n) const;
  uint32_t nucleus(uint32_t n, double total);
  uint32_t pick(uint32_t n, double total);
  std::vector<Candidate>::iterator candidate(uint32_t k);
};

// Numerically stable log-softmax of `logits` into `out` (same size): max subtracted, sum in
// double. -inf entries give -inf; all -inf gives all -inf; any NaN or +inf gives all NaN.
void log_softmax(std::span<const float> logits, std::span<float> out);

}  // namespace kipp
