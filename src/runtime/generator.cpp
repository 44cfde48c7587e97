// Generation on one session. One loop serves plain and speculative decoding:
//
//   prefill:  eval(prompt) -> logits of its last position -> sample the first token.
//   step:     the last accepted token is "pending" (emitted, not yet in the cache). Evaluate
//             [pending + draft] in ONE eval with draft+1 logit rows, then sample row by row:
//             row i gives the token after draft[i-1]; while it equals draft[i] the draft token
//             (already in the cache) is accepted; the first sampled token that differs (or the
//             bonus token after a fully accepted draft) becomes the next pending token. The
//             rejected draft positions are truncated off the cache. Without a draft a step is
//             the plain eval([pending]) -> sample.
//   finish:   the session is brought to exactly prompt + emitted tokens (the last pending token
//             evaluated, surplus draft positions truncated).
//
// Speculative decoding is greedy only: the sampler is deterministic at temperature 0, and each
// row's logits are bitwise those a one-token eval gives (the engine's per-row determinism), so
// sampling row i after the sampler has seen draft[0..i) reproduces plain greedy decoding token
// for token, penalties and logit bias included.
//
// Every accepted token goes through the same path: stop token check, room check, result,
// IncrementalDecoder (complete UTF-8 only), StopStringMatcher (hold back possible stop-string
// prefixes), callback, max_tokens.
#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "runtime/prompt_lookup.h"
#include "runtime/stop_strings.h"

namespace kipp {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string fmt(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

Status check_options(const Engine& engine, const Session& session, std::span<const uint32_t> prompt,
                     const GenerateOptions& options) {
  if (prompt.empty()) return make_error("the prompt is empty: generation needs at least one token to continue from");
  const uint64_t free_positions = session.capacity() - session.length();
  if (prompt.size() > free_positions)
    return make_error("the prompt (" + std::to_string(prompt.size()) + " tokens) does not fit the session: it holds " +
                      std::to_string(session.length()) + " of its " + std::to_string(session.capacity()) +
                      " positions, " + std::to_string(free_positions) + " are free");
  for (uint32_t id : options.stop_tokens)
    if (id >= engine.vocab_size())
      return make_error("stop token id " + std::to_string(id) + " is out of range (vocabulary size " +
                        std::to_string(engine.vocab_size()) + ")");
  const SpeculativeOptions& spec = options.speculative;
  if (spec.enabled) {
    if (options.sampling.temperature != 0.0f)
      return make_error("speculative decoding is greedy only: temperature must be 0, found " +
                        fmt(options.sampling.temperature));
    if (spec.max_draft == 0) return make_error("speculative decoding: max_draft must be at least 1, found 0");
    if (spec.ngram_min == 0 || spec.ngram_min > spec.ngram_max)
      return make_error("speculative decoding: expected 1 <= ngram_min <= ngram_max, found ngram_min " +
                        std::to_string(spec.ngram_min) + ", ngram_max " + std::to_string(spec.ngram_max));
    if (!(spec.min_acceptance >= 0.0 && spec.min_acceptance <= 1.0))
      return make_error("speculative decoding: min_acceptance must be in [0, 1], found " + fmt(spec.min_acceptance));
    if (spec.gate_window == 0) return make_error("speculative decoding: gate_window must be at least 1, found 0");
  }
  return ok_status();
}

}  // namespace

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::StopToken: return "stop_token";
    case FinishReason::StopString: return "stop_string";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::ContextFull: return "context_full";
  }
  return "unknown";
}

std::vector<uint32_t> default_stop_tokens(const Engine& engine) {
  std::vector<uint32_t> stops;
  const uint32_t eos = engine.config().eos_token_id;
  if (eos < engine.vocab_size()) stops.push_back(eos);
  for (const char* text : {"<|im_end|>", "<|endoftext|>"}) {
    auto ids = engine.tokenizer().encode(text, SpecialTokens::Parse);
    if (!ids.ok() || ids->size() != 1) continue;  // not one added token in this vocabulary
    const uint32_t id = (*ids)[0];
    if (!engine.tokenizer().is_added_token(id) || id >= engine.vocab_size()) continue;
    if (std::find(stops.begin(), stops.end(), id) == stops.end()) stops.push_back(id);
  }
  return stops;
}

Expected<GenerateResult> generate(Engine& engine, Session& session, std::span<const uint32_t> prompt,
                                  const GenerateOptions& options, const TextCallback& on_text) {
  KIPP_RETURN_IF_ERROR(check_options(engine, session, prompt, options));
  const uint32_t vocab = engine.vocab_size();
  KIPP_ASSIGN_OR_RETURN(Sampler sampler, with_context(Sampler::create(options.sampling, vocab), "sampling"));
  const SpeculativeOptions& spec = options.speculative;
  const std::vector<uint32_t> stops = options.stop_tokens.empty() ? default_stop_tokens(engine) : options.stop_tokens;
  const bool has_stop_strings =
      std::any_of(options.stop.begin(), options.stop.end(), [](const std::string& s) { return !s.empty(); });

  GenerateResult result;
  GenerateStats& stats = result.stats;
  std::vector<float> logits(size_t{vocab} * (spec.enabled ? spec.max_draft + 1 : 1));
  const auto row = [&](uint32_t i) { return std::span<const float>(logits).subspan(size_t{i} * vocab, vocab); };

  const auto prefill_start = Clock::now();
  KIPP_RETURN_IF_ERROR(with_context(session.eval(prompt, 1, logits.data()), "evaluating the prompt"));
  stats.prefill_seconds = seconds_since(prefill_start);
  stats.prompt_tokens = static_cast<uint32_t>(prompt.size());
  const auto decode_start = Clock::now();

  // The logical sequence: the session's tokens, then the pending token (if any).
  std::vector<uint32_t> history(session.tokens().begin(), session.tokens().end());
  sampler.observe(history);

  IncrementalDecoder decoder(engine.tokenizer());
  StopStringMatcher matcher(has_stop_strings ? options.stop : std::vector<std::string>{});
  bool finished = false;
  Status failure;

  const auto finish = [&](FinishReason reason) {
    result.finish = reason;
    finished = true;
  };
  // Text out: to the result and the callback; false when the callback cancels.
  const auto deliver = [&](std::string_view piece) {
    if (piece.empty()) return true;
    result.text.append(piece);
    return !on_text || on_text(piece);
  };
  // Decoded text through the stop-string matcher; false when generation must end.
  const auto push_text = [&](std::string_view text) {
    const StopStringMatcher::Output out = matcher.push(text);
    if (!deliver(out.text)) {
      finish(FinishReason::Cancelled);
      return false;
    }
    if (out.stopped) {
      finish(FinishReason::StopString);
      return false;
    }
    return true;
  };
  // One sampled token; false when generation ends with it (it may or may not be emitted).
  const auto accept = [&](SampledToken token) {
    if (std::find(stops.begin(), stops.end(), token.id) != stops.end()) {
      result.stop_token = token.id;
      finish(FinishReason::StopToken);
      if (options.include_stop_token_text) {
        auto text = decoder.push(token.id);
        if (!text.ok()) {
          failure = Error{text.error()};
          return false;
        }
        const StopStringMatcher::Output out = matcher.push(*text);
        if (!deliver(out.text)) return false;  // nothing left to cancel
        if (out.stopped) finished = true;      // stop text dropped; still a stop-token finish
      }
      return false;
    }
    if (history.size() >= session.capacity()) {
      finish(FinishReason::ContextFull);  // no position for it: dropped
      return false;
    }
    const uint32_t id = token.id;
    result.tokens.push_back(std::move(token));
    history.push_back(id);
    ++stats.generated_tokens;
    auto text = decoder.push(id);
    if (!text.ok()) {
      failure = Error{text.error()};
      return false;
    }
    if (!push_text(*text)) return false;
    if (stats.generated_tokens >= options.max_tokens) {
      finish(FinishReason::Length);
      return false;
    }
    return true;
  };
  const auto sample_row = [&](uint32_t i) -> Expected<SampledToken> { return sampler.sample(row(i)); };

  if (options.max_tokens == 0) {
    finish(FinishReason::Length);
  } else {
    auto first = sample_row(0);
    if (!first.ok()) return Error{first.error()};
    accept(std::move(*first));
  }

  DraftGate gate(spec.min_acceptance, spec.gate_window, spec.gate_cooldown);
  PromptLookupOptions lookup;
  lookup.ngram_min = spec.ngram_min;
  lookup.ngram_max = spec.ngram_max;
  std::vector<uint32_t> batch;
  while (!finished && failure.ok()) {
    // history = session + [pending]
    const uint32_t pending = history.back();
    std::vector<uint32_t> draft;
    if (spec.enabled && gate.open(stats.generated_tokens)) {
      const uint64_t room = session.capacity() - history.size();  // positions after pending
      const uint64_t remaining = options.max_tokens - stats.generated_tokens;  // >= 1
      lookup.max_draft = static_cast<uint32_t>(std::min<uint64_t>({gate.draft_length(spec.max_draft), room, remaining - 1}));
      if (lookup.max_draft > 0) draft = prompt_lookup_draft(history, lookup);
    }
    batch.assign(1, pending);
    batch.insert(batch.end(), draft.begin(), draft.end());
    const auto rows = static_cast<uint32_t>(batch.size());
    if (Status evaluated = session.eval(batch, rows, logits.data()); !evaluated.ok())
      return make_error("decoding: " + evaluated.message());
    ++stats.decode_steps;

    uint32_t matched = 0;
    for (uint32_t i = 0; i < rows; ++i) {
      auto token = sample_row(i);
      if (!token.ok()) return Error{token.error()};
      const bool agrees = i < draft.size() && token->id == draft[i];
      matched += agrees ? 1 : 0;
      if (!accept(std::move(*token)) || !agrees) break;
    }
    if (!draft.empty()) {
      ++stats.draft_steps;
      stats.drafted_tokens += static_cast<uint32_t>(draft.size());
      stats.accepted_tokens += matched;
      gate.record(static_cast<uint32_t>(draft.size()), matched, stats.generated_tokens);
    }
    // Drop the rejected draft positions: the session keeps everything but the new pending token.
    if (!finished && session.length() != history.size() - 1) {
      if (Status cut = session.truncate(static_cast<uint32_t>(history.size() - 1)); !cut.ok()) return Error{cut.error()};
    }
  }
  if (!failure.ok()) return Error{failure.error()};

  // The session holds exactly base + emitted tokens.
  const auto target = static_cast<uint32_t>(history.size());
  if (session.length() > target) {
    KIPP_RETURN_IF_ERROR(session.truncate(target));
  } else if (session.length() < target) {
    const std::span<const uint32_t> missing = std::span<const uint32_t>(history).subspan(session.length());
    KIPP_RETURN_IF_ERROR(with_context(session.eval(missing, 0, nullptr), "evaluating the last token"));
    ++stats.decode_steps;
  }

  // Held-back text is final now, unless a stop string or a cancel ended generation.
  if (result.finish != FinishReason::StopString && result.finish != FinishReason::Cancelled) {
    const StopStringMatcher::Output out = matcher.push(decoder.finish());
    if (out.stopped) result.finish = FinishReason::StopString;
    deliver(out.text);  // the callback can no longer cancel anything
    if (!out.stopped) deliver(matcher.flush());
  }
  stats.decode_seconds = seconds_since(decode_start);
  return result;
}

}  // namespace kipp
