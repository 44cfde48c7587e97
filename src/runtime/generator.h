// Generation on one session: prompt tokens in, streamed text out, with sampling, stop tokens,
// stop strings, a token budget and optional prompt-lookup speculative decoding (greedy only).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"
#include "runtime/engine.h"
#include "sampling/sampler.h"

namespace kipp {

// Prompt-lookup speculative decoding (runtime/prompt_lookup.h drafts from the session's own
// history): each step evaluates [last token + draft] in one multi-row eval and keeps the
// longest draft prefix the sampler agrees with, plus the model's own next token. Greedy only,
// so the output is token for token what plain greedy decoding gives.
struct SpeculativeOptions {
  bool enabled = false;                   // greedy (temperature 0) only
  uint32_t max_draft = 8;                 // draft tokens verified per step (>= 1)
  uint32_t ngram_min = 2, ngram_max = 4;  // n-gram sizes the prompt-lookup drafter matches
  double min_acceptance = 0.3;            // adaptive gate: below this recent acceptance rate, stop drafting
  // The gate measures acceptance over the last ~gate_window drafted tokens (older ones decay by
  // halves); when it closes, gate_cooldown tokens (doubling on consecutive closures) are
  // generated without drafting, then it retries. Draft lengths ramp up from 1 (see DraftGate).
  uint32_t gate_window = 8;
  uint32_t gate_cooldown = 32;
};

struct GenerateOptions {
  SamplingParams sampling;
  uint32_t max_tokens = 256;
  std::vector<std::string> stop;         // stop strings
  std::vector<uint32_t> stop_tokens;     // empty: the model's (eos, <|im_end|>, <|endoftext|>)
  bool include_stop_token_text = false;  // stop tokens are never emitted by default
  SpeculativeOptions speculative;
  // Constrained decoding: every token is sampled among those the grammar allows, and generation
  // ends when the grammar is complete and allows nothing more (draft tokens are checked too).
  grammar::GrammarPtr grammar;
};

enum class FinishReason { StopToken, StopString, Length, Cancelled, ContextFull, GrammarComplete };
std::string_view finish_reason_name(FinishReason reason);

struct GenerateStats {
  uint32_t prompt_tokens = 0;  // evaluated (after any reuse)
  uint32_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;     // everything after the prompt's eval, sampling included
  uint32_t decode_steps = 0;     // evals after the prompt's (one per token without drafts)
  uint32_t drafted_tokens = 0;   // speculative decoding: draft tokens evaluated
  uint32_t accepted_tokens = 0;  // of those, the ones the model agreed with
  uint32_t draft_steps = 0;      // decode steps that carried a draft
};

struct GenerateResult {
  std::string text;                  // everything passed to the callback, in order
  std::vector<SampledToken> tokens;  // the generated tokens, stop token excluded
  FinishReason finish = FinishReason::Length;
  std::optional<uint32_t> stop_token;  // the stop token that ended generation (FinishReason::StopToken)
  GenerateStats stats;
};

// Called with each piece of text as it becomes final (complete UTF-8, not part of a possible
// stop string; never empty); returning false cancels generation (FinishReason::Cancelled).
using TextCallback = std::function<bool(std::string_view text)>;

// Appends `prompt` (at least one token) to `session`, which may already hold a conversation,
// and generates until a stop token, a stop string, max_tokens, a cancel or a full session.
//
// Afterwards the session holds exactly what it held, then the prompt, then result.tokens: the
// stop token is neither emitted nor evaluated into the cache (a caller continuing the
// conversation starts its next prompt with it, e.g. "<|im_end|>\n<|im_start|>user..."), and
// tokens that completed a stop string stay (the text after the stop string is dropped from
// the output, not from the cache). A token sampled when the session has no position left for
// it is dropped (FinishReason::ContextFull). With include_stop_token_text the stop token's
// text is emitted, still without the token entering the cache or result.tokens.
//
// Errors (nothing generated): an empty prompt, a prompt that does not fit the session's free
// positions, invalid sampling parameters or stop token ids, speculative decoding with a
// temperature other than 0. An eval error mid-way is returned as is (the session then holds
// what was evaluated so far).
Expected<GenerateResult> generate(Engine& engine, Session& session, std::span<const uint32_t> prompt,
                                  const GenerateOptions& options, const TextCallback& on_text = {});

// The model's stop tokens: eos plus <|im_end|> and <|endoftext|> when the vocabulary has them.
std::vector<uint32_t> default_stop_tokens(const Engine& engine);

}  // namespace kipp
