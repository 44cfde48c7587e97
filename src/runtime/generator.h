// Generation on one session: prompt tokens in, streamed text out, with sampling, stop tokens,
// stop strings, a token budget and optional prompt-lookup speculative decoding (greedy only).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"

namespace kipp {

struct SpeculativeOptions {
  bool enabled = false;           // greedy (temperature 0) only
  uint32_t max_draft = 8;         // draft tokens verified per step
  uint32_t ngram_min = 2, ngram_max = 4;  // n-gram sizes the prompt-lookup drafter matches
  double min_acceptance = 0.3;    // adaptive gate: below this recent acceptance rate, stop drafting
};

struct GenerateOptions {
  SamplingParams sampling;
  uint32_t max_tokens = 256;
  std::vector<std::string> stop;         // stop strings
  std::vector<uint32_t> stop_tokens;     // empty: the model's (eos, <|im_end|>, <|endoftext|>)
  bool include_stop_token_text = false;  // stop tokens are never emitted by default
  SpeculativeOptions speculative;
};

enum class FinishReason { StopToken, StopString, Length, Cancelled, ContextFull };
std::string_view finish_reason_name(FinishReason reason);

struct GenerateStats {
  uint32_t prompt_tokens = 0;     // evaluated (after any reuse)
  uint32_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  uint32_t drafted_tokens = 0;    // speculative decoding
  uint32_t accepted_tokens = 0;
};

struct GenerateResult {
  std::string text;
  std::vector<SampledToken> tokens;
  FinishReason finish = FinishReason::Length;
  GenerateStats stats;
};

// Called with each piece of text as it becomes final (complete UTF-8, not part of a possible
// stop string) and the tokens that produced it; returning false cancels generation.
using TextCallback = std::function<bool(std::string_view text)>;

// Appends `prompt` to `session` (which may already hold a conversation) and generates.
// Generated tokens stay in the session's cache; a stop token is evaluated into it too only if
// the caller continues the conversation (see Generator docs in generator.cpp).
Expected<GenerateResult> generate(Engine& engine, Session& session, std::span<const uint32_t> prompt,
                                  const GenerateOptions& options, const TextCallback& on_text = {});

// The model's stop tokens: eos plus <|im_end|> and <|endoftext|> when the vocabulary has them.
std::vector<uint32_t> default_stop_tokens(const Engine& engine);

}  // namespace kipp
