// The sampling core. Sampler::sample works through one position's logits in this order:
//
//  1. Check: every logit must be finite or -inf. NaN and +inf are errors naming the first
//     offending id; -inf is a masked token (probability 0). All -inf is an error.
//  2. Log-probabilities: a stable log-softmax of the RAW logits (max subtracted, exp summed in
//     double). The sampled token's logprob and the top_logprobs alternatives (logprob desc,
//     ties to the lower id) come from these, so they describe the model, not the sampler.
//  3. Working values, in double (so no finite input overflows in what follows):
//     a. logit_bias added (duplicate ids add up; a masked -inf token stays masked);
//     b. repetition penalty, CTRL-style, once per distinct token in the window:
//        v > 0 ? v / r : v * r;
//     c. frequency penalty: v -= count_in_window * frequency_penalty;
//     d. presence penalty: v -= presence_penalty if the token is in the window.
//     The window is the last kPenaltyWindow (64) tokens of the sequence: observe() adds the
//     prompt, sample() appends each sampled token. Ids >= vocab_size in observe() are kept in
//     the window but penalize nothing.
//  4. temperature == 0: greedy, argmax of the working values, ties to the lowest id; the random
//     generator is not advanced; top_k / top_p / min_p play no part.
//  5. Otherwise: v / temperature; top_k keeps the k largest (ties to the lower id; 0 or
//     k >= candidates keeps all); softmax over the candidates; min_p drops tokens whose
//     probability is below min_p * p(best); top_p, over the distribution renormalized after
//     min_p, keeps the smallest most-likely-first set (ties to the lower id) whose mass is
//     >= top_p (always at least the best token); renormalize; draw.
//  6. The draw: exactly one 64-bit output of the sequence's std::mt19937_64 (seeded with
//     params.seed; the engine is fully specified by the standard), turned into u in [0, 1) as
//     (bits >> 11) * 2^-53, so the same seed gives the same tokens with any standard library.
//     Walking the kept tokens in ascending id order, the token is the first whose cumulative
//     weight exceeds u * total (a canonical order, so no std::nth_element arrangement leaks in).
//
// Nothing is allocated per call except the returned SampledToken's `top` list: the working
// values and candidate ids live in member scratch sized once at creation.
#include "sampling/sampler.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

#include "kernels/cpu/vector_math.h"

namespace kipp {
namespace {

constexpr uint32_t kMaxTopLogprobs = 20;

std::string fmt(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  return buffer;
}

// log(sum(exp(x))) of logits that are finite or -inf, given their maximum (finite): the max is
// subtracted before exp (stable), the sum is in double. logprob(i) = x_i - log_sum_exp.
double log_sum_exp(std::span<const float> logits, float max) {
  return static_cast<double>(max) + std::log(kernels::sum_exp(logits, max));
}

float logprob_of(float logit, double lse) { return static_cast<float>(static_cast<double>(logit) - lse); }

// Most likely first, ties to the lower id: a strict total order, so every selection made with
// it (top_logprobs, top_k, top_p) picks the same set on every standard library.
constexpr auto more_likely = [](const auto& a, const auto& b) {
  return a.value != b.value ? a.value > b.value : a.id < b.id;
};

// 1. NaN and +inf are errors; -inf masks a token. The maximum logit, finite.
Expected<float> checked_max(std::span<const float> logits) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const kernels::MaxScan scan = kernels::scan_max(logits);
  if (!scan.finite_or_minus_inf) {
    const auto bad = std::find_if(logits.begin(), logits.end(), [](float x) { return !(x < kInf); });
    return make_error("sampler: logit of token " + std::to_string(bad - logits.begin()) + " is " + fmt(*bad) +
                      " (expected finite, or -inf for a masked token)");
  }
  if (scan.max == -kInf) return make_error("sampler: all logits are -inf (every token is masked)");
  return scan.max;
}

}  // namespace

Status SamplingParams::validate(uint32_t vocab_size) const {
  if (!std::isfinite(temperature) || temperature < 0)
    return make_error("temperature: expected a finite value >= 0, found " + fmt(temperature));
  if (!(top_p > 0 && top_p <= 1)) return make_error("top_p: expected a value in (0, 1], found " + fmt(top_p));
  if (!(min_p >= 0 && min_p <= 1)) return make_error("min_p: expected a value in [0, 1], found " + fmt(min_p));
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0)
    return make_error("repetition_penalty: expected a finite value > 0, found " + fmt(repetition_penalty));
  if (!std::isfinite(frequency_penalty))
    return make_error("frequency_penalty: expected a finite value, found " + fmt(frequency_penalty));
  if (!std::isfinite(presence_penalty))
    return make_error("presence_penalty: expected a finite value, found " + fmt(presence_penalty));
  for (const auto& [id, bias] : logit_bias) {
    if (id >= vocab_size)
      return make_error("logit_bias: token id " + std::to_string(id) + " is outside the vocabulary (size " +
                        std::to_string(vocab_size) + ")");
    if (!std::isfinite(bias))
      return make_error("logit_bias: expected a finite bias for token " + std::to_string(id) + ", found " + fmt(bias));
  }
  if (top_logprobs > kMaxTopLogprobs)
    return make_error("top_logprobs: expected at most " + std::to_string(kMaxTopLogprobs) + ", found " +
                      std::to_string(top_logprobs));
  return ok_status();
}

Sampler::Sampler(const SamplingParams& params, uint32_t vocab_size)
    : params_(params), vocab_size_(vocab_size), rng_(params.seed), candidates_(vocab_size) {
  window_.reserve(kPenaltyWindow);
  touched_.reserve(params.logit_bias.size() + kPenaltyWindow);
}

Expected<Sampler> Sampler::create(const SamplingParams& params, uint32_t vocab_size) {
  if (vocab_size == 0) return make_error("sampler: vocabulary size must be > 0, found 0");
  KIPP_RETURN_IF_ERROR(params.validate(vocab_size));
  return Sampler(params, vocab_size);
}

void Sampler::observe(std::span<const uint32_t> tokens) {
  if (tokens.size() >= kPenaltyWindow) {
    window_.assign(tokens.end() - kPenaltyWindow, tokens.end());
    return;
  }
  const size_t keep = std::min<size_t>(window_.size(), kPenaltyWindow - tokens.size());
  window_.erase(window_.begin(), window_.end() - static_cast<std::ptrdiff_t>(keep));
  window_.insert(window_.end(), tokens.begin(), tokens.end());
}

Expected<SampledToken> Sampler::sample(std::span<const float> logits) {
  if (logits.size() != vocab_size_)
    return make_error("sampler: expected " + std::to_string(vocab_size_) + " logits, found " +
                      std::to_string(logits.size()));
  KIPP_ASSIGN_OR_RETURN(const float max, checked_max(logits));

  // 2. Log-probabilities of the raw logits and the top alternatives.
  const double lse = log_sum_exp(logits, max);
  SampledToken result;
  result.top = top_alternatives(logits, lse);

  // 3. Working values: the raw logits except where bias or penalties moved them (touched_).
  adjust(logits);
  const uint32_t chosen = params_.temperature == 0.0f ? greedy(logits) : draw(logits);

  result.id = chosen;
  result.logprob = logprob_of(logits[chosen], lse);
  observe(std::span<const uint32_t>(&chosen, 1));
  return result;
}

std::vector<TokenLogprob> Sampler::top_alternatives(std::span<const float> logits, double lse) {
  std::vector<TokenLogprob> top;
  const uint32_t n_top = std::min(params_.top_logprobs, vocab_size_);
  if (n_top == 0) return top;
  std::vector<Candidate>& c = candidates_;
  for (uint32_t i = 0; i < vocab_size_; ++i) c[i] = {static_cast<double>(logprob_of(logits[i], lse)), i};
  std::partial_sort(c.begin(), c.begin() + n_top, c.end(), more_likely);
  top.reserve(n_top);
  // Masked tokens (-inf: a grammar forbids them) are not alternatives: fewer may be reported.
  for (uint32_t k = 0; k < n_top && std::isfinite(c[k].value); ++k)
    top.push_back({c[k].id, static_cast<float>(c[k].value)});
  return top;
}

// 5. and 6.: truncate the candidates, then one draw among those kept.
uint32_t Sampler::draw(std::span<const float> logits) {
  uint32_t n = scaled_candidates(logits);
  bool reordered = false;
  if (params_.top_k > 0 && params_.top_k < n) {
    std::nth_element(candidate(0), candidate(params_.top_k), candidate(n), more_likely);
    n = params_.top_k;
    reordered = true;
  }
  n = weigh(n);
  double total = total_weight(n);
  if (params_.top_p < 1.0f) {
    n = nucleus(n, total);
    total = total_weight(n);
    reordered = true;
  }
  // The draw walks the kept tokens in id order, whatever the truncation did to the order, so
  // the result does not depend on the standard library's nth_element.
  if (reordered)
    std::sort(candidate(0), candidate(n), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  return pick(n, total);
}

std::vector<Sampler::Candidate>::iterator Sampler::candidate(uint32_t k) {
  return candidates_.begin() + static_cast<std::ptrdiff_t>(k);
}

// The candidates: every unmasked token, in id order, its working value scaled by temperature.
uint32_t Sampler::scaled_candidates(std::span<const float> logits) {
  constexpr double kMasked = -std::numeric_limits<double>::infinity();
  std::vector<Candidate>& c = candidates_;
  for (uint32_t i = 0; i < vocab_size_; ++i) c[i] = {static_cast<double>(logits[i]), i};
  for (const auto& [id, value] : touched_) c[id].value = value;
  const double temperature = params_.temperature;
  uint32_t n = 0;
  for (uint32_t i = 0; i < vocab_size_; ++i)
    if (c[i].value != kMasked) c[n++] = {c[i].value / temperature, i};
  return n;
}

// Softmax, unnormalized: the best token's weight is exactly 1. Then min_p relative to that
// weight (1), so the best token always stays. Returns the count kept.
uint32_t Sampler::weigh(uint32_t n) {
  std::vector<Candidate>& c = candidates_;
  double best = -std::numeric_limits<double>::infinity();
  for (uint32_t k = 0; k < n; ++k) best = std::max(best, c[k].value);
  for (uint32_t k = 0; k < n; ++k) c[k].value = static_cast<double>(std::exp(static_cast<float>(c[k].value - best)));
  if (params_.min_p > 0.0f) {
    const double threshold = params_.min_p;
    uint32_t kept = 0;
    for (uint32_t k = 0; k < n; ++k)
      if (c[k].value >= threshold) c[kept++] = c[k];
    n = kept;
  }
  return n;
}

double Sampler::total_weight(uint32_t n) const {
  double total = 0;
  for (uint32_t k = 0; k < n; ++k) total += candidates_[k].value;
  return total;
}

// top_p of the n candidates weighing `total`: find the most likely tokens a growing block at a
// time (partition the rest, sum the block), then sort only the block where the mass is reached
// and cut there. Returns the count kept, most likely first.
uint32_t Sampler::nucleus(uint32_t n, double total) {
  std::vector<Candidate>& c = candidates_;
  const double target = static_cast<double>(params_.top_p) * total;
  // A token lighter than (1 - top_p) * total / n cannot be in the nucleus: all the tokens no
  // more likely than it weigh less than (1 - top_p) * total together, so those more likely
  // already exceed the target. Dropping them first makes the rest cheap; the best token
  // (weight 1 >= the mean weight > floor) always stays.
  const double floor = (1.0 - static_cast<double>(params_.top_p)) * total / n;
  uint32_t heavy = 0;
  for (uint32_t k = 0; k < n; ++k)
    if (c[k].value >= floor) c[heavy++] = c[k];
  n = heavy;
  double mass = 0;
  uint32_t done = 0, block_end = std::min<uint32_t>(n, 64);
  while (done < n) {
    if (block_end < n) std::nth_element(candidate(done), candidate(block_end), candidate(n), more_likely);
    double block_mass = 0;
    for (uint32_t k = done; k < block_end; ++k) block_mass += c[k].value;
    if (mass + block_mass >= target || block_end == n) {
      std::sort(candidate(done), candidate(block_end), more_likely);
      for (; done < block_end; ++done) {
        mass += c[done].value;
        if (mass >= target) return done + 1;
      }
    } else {
      mass += block_mass;
      done = block_end;
    }
    block_end = static_cast<uint32_t>(std::min<uint64_t>(n, uint64_t{block_end} * 2));
  }
  return n;
}

// 6. One draw from the generator's raw bits. If rounding carries `point` past the end, the
// last token with weight > 0 is chosen.
uint32_t Sampler::pick(uint32_t n, double total) {
  const std::vector<Candidate>& c = candidates_;
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  const double point = u * total;
  double cumulative = 0;
  uint32_t chosen = c[0].id;
  for (uint32_t k = 0; k < n; ++k) {
    if (c[k].value <= 0) continue;
    cumulative += c[k].value;
    chosen = c[k].id;
    if (point < cumulative) break;
  }
  return chosen;
}

void Sampler::adjust(std::span<const float> logits) {
  touched_.clear();
  const auto value_of = [&](uint32_t id) -> double& {
    for (auto& [touched, value] : touched_)
      if (touched == id) return value;
    touched_.push_back({id, static_cast<double>(logits[id])});
    return touched_.back().second;
  };
  for (const auto& [id, bias] : params_.logit_bias) value_of(id) += static_cast<double>(bias);
  const double r = params_.repetition_penalty;
  const double freq = params_.frequency_penalty, presence = params_.presence_penalty;
  if (r == 1.0 && freq == 0.0 && presence == 0.0) return;
  const auto first = window_.begin();
  for (size_t i = 0; i < window_.size(); ++i) {
    const uint32_t id = window_[i];
    const auto at = first + static_cast<std::ptrdiff_t>(i);
    if (id >= vocab_size_ || std::find(first, at, id) != at) continue;  // counted at its first occurrence
    const auto count = static_cast<double>(std::count(at, window_.end(), id));
    double& x = value_of(id);
    x = x > 0 ? x / r : x * r;
    x -= count * freq + presence;
  }
}

// 4. The first maximum of the working values (lowest id on ties; masked tokens lose to any
// other): the raw logits' maximum over each run of untouched ids, in vectors, and the touched
// ids' values between them, offered in id order so the first of equal values stays.
uint32_t Sampler::greedy(std::span<const float> logits) {
  constexpr double kMasked = -std::numeric_limits<double>::infinity();
  std::sort(touched_.begin(), touched_.end());
  double best = kMasked;
  uint32_t chosen = 0;
  const auto offer = [&](double value, size_t id) {
    if (value > best) {
      best = value;
      chosen = static_cast<uint32_t>(id);
    }
  };
  const auto offer_untouched = [&](size_t begin, size_t end) {
    if (begin >= end) return;
    const kernels::MaxScan run = kernels::scan_max(logits.subspan(begin, end - begin));
    offer(static_cast<double>(run.max), begin + run.first);
  };
  size_t next = 0;
  for (const auto& [id, value] : touched_) {
    offer_untouched(next, id);
    offer(value, id);
    next = size_t{id} + 1;
  }
  offer_untouched(next, vocab_size_);
  return chosen;
}

void log_softmax(std::span<const float> logits, std::span<float> out) {
  assert(out.size() == logits.size());
  const size_t n = std::min(logits.size(), out.size());
  if (n == 0) return;
  bool invalid = false, any_finite = false;
  for (size_t i = 0; i < n; ++i) {
    invalid = invalid || std::isnan(logits[i]) || logits[i] == std::numeric_limits<float>::infinity();
    any_finite = any_finite || std::isfinite(logits[i]);
  }
  if (invalid || !any_finite) {
    // NaN or +inf in: NaN out. All -inf: every token masked, all -inf out.
    const float fill = invalid ? std::numeric_limits<float>::quiet_NaN() : -std::numeric_limits<float>::infinity();
    std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n), fill);
    return;
  }
  const auto in = logits.first(n);
  const double lse = log_sum_exp(in, *std::max_element(in.begin(), in.end()));
  for (size_t i = 0; i < n; ++i) out[i] = logprob_of(logits[i], lse);
}

}  // namespace kipp
