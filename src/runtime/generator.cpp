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

#include "runtime/constraint.h"
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
    case FinishReason::GrammarComplete: return "grammar_complete";
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

namespace {

// One generate() call: the loop described at the top of this file, one member per step.
class Generation {
 public:
  Generation(Engine& engine, Session& session, const GenerateOptions& options, const TextCallback& on_text,
             Sampler sampler, std::optional<Constraint> constraint)
      : session_(session),
        options_(options),
        spec_(options.speculative),
        on_text_(on_text),
        vocab_(engine.vocab_size()),
        sampler_(std::move(sampler)),
        constraint_(std::move(constraint)),
        stops_(options.stop_tokens.empty() ? default_stop_tokens(engine) : options.stop_tokens),
        logits_(size_t{vocab_} * (spec_.enabled ? spec_.max_draft + 1 : 1)),
        decoder_(engine.tokenizer()),
        matcher_(has_stop_strings(options) ? options.stop : std::vector<std::string>{}),
        gate_(spec_.min_acceptance, spec_.gate_window, spec_.gate_cooldown) {
    lookup_.ngram_min = spec_.ngram_min;
    lookup_.ngram_max = spec_.ngram_max;
  }

  Expected<GenerateResult> run(std::span<const uint32_t> prompt) {
    KIPP_RETURN_IF_ERROR(prefill(prompt));
    const auto decode_start = Clock::now();
    // The logical sequence: the session's tokens, then the pending token (if any).
    history_.assign(session_.tokens().begin(), session_.tokens().end());
    sampler_.observe(history_);
    KIPP_RETURN_IF_ERROR(first_token());
    while (!finished_ && failure_.ok()) KIPP_RETURN_IF_ERROR(step());
    if (!failure_.ok()) return Error{failure_.error()};
    KIPP_RETURN_IF_ERROR(settle_session());
    flush_text();
    stats_.decode_seconds = seconds_since(decode_start);
    return std::move(result_);
  }

 private:
  static bool has_stop_strings(const GenerateOptions& options) {
    return std::any_of(options.stop.begin(), options.stop.end(), [](const std::string& s) { return !s.empty(); });
  }

  std::span<float> row(uint32_t i) { return std::span<float>(logits_).subspan(size_t{i} * vocab_, vocab_); }

  // Row i's token: sampled among the tokens the grammar allows, if there is one.
  Expected<SampledToken> sample(uint32_t i) {
    if (constraint_) {
      const uint64_t room = session_.capacity() - history_.size();
      constraint_->prepare(static_cast<uint32_t>(
          std::min<uint64_t>({options_.max_tokens - stats_.generated_tokens, std::max<uint64_t>(room, 1)})));
      constraint_->apply(row(i));
    }
    return sampler_.sample(row(i));
  }

  Status prefill(std::span<const uint32_t> prompt) {
    const auto prefill_start = Clock::now();
    KIPP_RETURN_IF_ERROR(with_context(session_.eval(prompt, 1, logits_.data()), "evaluating the prompt"));
    stats_.prefill_seconds = seconds_since(prefill_start);
    stats_.prompt_tokens = static_cast<uint32_t>(prompt.size());
    return ok_status();
  }

  Status first_token() {
    if (options_.max_tokens == 0) {
      finish(FinishReason::Length);
      return ok_status();
    }
    KIPP_ASSIGN_OR_RETURN(SampledToken first, sample(0));
    accept(std::move(first));
    return ok_status();
  }

  void finish(FinishReason reason) {
    result_.finish = reason;
    finished_ = true;
  }

  // Text out: to the result and the callback; false when the callback cancels.
  bool deliver(std::string_view piece) {
    if (piece.empty()) return true;
    result_.text.append(piece);
    return !on_text_ || on_text_(piece);
  }

  // Decoded text through the stop-string matcher; false when generation must end.
  bool push_text(std::string_view text) {
    const StopStringMatcher::Output out = matcher_.push(text);
    if (!deliver(out.text)) {
      finish(FinishReason::Cancelled);
      return false;
    }
    if (out.stopped) {
      finish(FinishReason::StopString);
      return false;
    }
    return true;
  }

  // A stop token ends generation; its text goes out only with include_stop_token_text.
  void accept_stop_token(uint32_t id) {
    result_.stop_token = id;
    finish(FinishReason::StopToken);
    if (!options_.include_stop_token_text) return;
    auto text = decoder_.push(id);
    if (!text.ok()) {
      failure_ = Error{text.error()};
      return;
    }
    const StopStringMatcher::Output out = matcher_.push(*text);
    if (!deliver(out.text)) return;     // nothing left to cancel
    if (out.stopped) finished_ = true;  // stop text dropped; still a stop-token finish
  }

  // One sampled token; false when generation ends with it (it may or may not be emitted).
  bool accept(SampledToken token) {
    if (std::find(stops_.begin(), stops_.end(), token.id) != stops_.end()) {
      accept_stop_token(token.id);
      return false;
    }
    if (history_.size() >= session_.capacity()) {
      finish(FinishReason::ContextFull);  // no position for it: dropped
      return false;
    }
    const uint32_t id = token.id;
    if (constraint_) {
      if (Status allowed = constraint_->accept(id); !allowed.ok()) {  // the mask allowed it: a bug
        failure_ = Error{allowed.error()};
        return false;
      }
    }
    result_.tokens.push_back(std::move(token));
    history_.push_back(id);
    ++stats_.generated_tokens;
    auto text = decoder_.push(id);
    if (!text.ok()) {
      failure_ = Error{text.error()};
      return false;
    }
    if (!push_text(*text)) return false;
    if (constraint_ && constraint_->done()) {
      finish(FinishReason::GrammarComplete);
      return false;
    }
    if (stats_.generated_tokens >= options_.max_tokens) {
      // A constrained output complete at the limit (the token budget closed it) is whole.
      finish(constraint_ && constraint_->accepting() ? FinishReason::GrammarComplete : FinishReason::Length);
      return false;
    }
    return true;
  }

  // Draft tokens to follow the pending one, when speculative decoding is on and its gate open.
  std::vector<uint32_t> propose_draft() {
    if (!spec_.enabled || !gate_.open(stats_.generated_tokens)) return {};
    const uint64_t room = session_.capacity() - history_.size();               // positions after pending
    const uint64_t remaining = options_.max_tokens - stats_.generated_tokens;  // >= 1
    lookup_.max_draft =
        static_cast<uint32_t>(std::min<uint64_t>({gate_.draft_length(spec_.max_draft), room, remaining - 1}));
    if (lookup_.max_draft == 0) return {};
    return prompt_lookup_draft(history_, lookup_);
  }

  // One eval of [pending + draft], its rows sampled while they agree with the draft.
  Status step() {
    // history = session + [pending]
    const uint32_t pending = history_.back();
    const std::vector<uint32_t> draft = propose_draft();
    batch_.assign(1, pending);
    batch_.insert(batch_.end(), draft.begin(), draft.end());
    const auto rows = static_cast<uint32_t>(batch_.size());
    if (Status evaluated = session_.eval(batch_, rows, logits_.data()); !evaluated.ok())
      return make_error("decoding: " + evaluated.message());
    ++stats_.decode_steps;

    uint32_t matched = 0;
    for (uint32_t i = 0; i < rows; ++i) {
      KIPP_ASSIGN_OR_RETURN(SampledToken token, sample(i));
      const bool agrees = i < draft.size() && token.id == draft[i];
      matched += agrees ? 1 : 0;
      if (!accept(std::move(token)) || !agrees) break;
    }
    if (!draft.empty()) {
      ++stats_.draft_steps;
      stats_.drafted_tokens += static_cast<uint32_t>(draft.size());
      stats_.accepted_tokens += matched;
      gate_.record(static_cast<uint32_t>(draft.size()), matched, stats_.generated_tokens);
    }
    // Drop the rejected draft positions: the session keeps everything but the new pending token.
    if (!finished_ && session_.length() != history_.size() - 1) {
      KIPP_RETURN_IF_ERROR(session_.truncate(static_cast<uint32_t>(history_.size() - 1)));
    }
    return ok_status();
  }

  // The session holds exactly base + emitted tokens.
  Status settle_session() {
    const auto target = static_cast<uint32_t>(history_.size());
    if (session_.length() > target) {
      KIPP_RETURN_IF_ERROR(session_.truncate(target));
    } else if (session_.length() < target) {
      const std::span<const uint32_t> missing = std::span<const uint32_t>(history_).subspan(session_.length());
      KIPP_RETURN_IF_ERROR(with_context(session_.eval(missing, 0, nullptr), "evaluating the last token"));
      ++stats_.decode_steps;
    }
    return ok_status();
  }

  // Held-back text is final now, unless a stop string or a cancel ended generation.
  void flush_text() {
    if (result_.finish == FinishReason::StopString || result_.finish == FinishReason::Cancelled) return;
    const StopStringMatcher::Output out = matcher_.push(decoder_.finish());
    if (out.stopped) result_.finish = FinishReason::StopString;
    deliver(out.text);  // the callback can no longer cancel anything
    if (!out.stopped) deliver(matcher_.flush());
  }

  Session& session_;
  const GenerateOptions& options_;
  const SpeculativeOptions& spec_;
  const TextCallback& on_text_;
  const uint32_t vocab_;
  Sampler sampler_;
  std::optional<Constraint> constraint_;
  const std::vector<uint32_t> stops_;
  std::vector<float> logits_;
  std::vector<uint32_t> history_;
  IncrementalDecoder decoder_;
  StopStringMatcher matcher_;
  DraftGate gate_;
  PromptLookupOptions lookup_;
  std::vector<uint32_t> batch_;
  GenerateResult result_;
  GenerateStats& stats_ = result_.stats;
  bool finished_ = false;
  Status failure_;
};

}  // namespace

Expected<GenerateResult> generate(Engine& engine, Session& session, std::span<const uint32_t> prompt,
                                  const GenerateOptions& options, const TextCallback& on_text) {
  KIPP_RETURN_IF_ERROR(check_options(engine, session, prompt, options));
  KIPP_ASSIGN_OR_RETURN(Sampler sampler,
                        with_context(Sampler::create(options.sampling, engine.vocab_size()), "sampling"));
  std::optional<Constraint> constraint;
  if (options.grammar) {
    constraint.emplace(
        options.grammar,
        grammar_vocabulary(engine, options.stop_tokens.empty() ? default_stop_tokens(engine) : options.stop_tokens));
  }
  Generation generation(engine, session, options, on_text, std::move(sampler), std::move(constraint));
  return generation.run(prompt);
}

}  // namespace kipp
