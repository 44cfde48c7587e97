// `kipp generate`: one prompt in, generated text streamed to stdout, statistics to stderr (or
// one JSON object with --json). Sampling, stop strings, logit bias, logprobs and prompt-lookup
// speculative decoding are the library's (runtime/generator.h); this file parses and prints.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/backend_flag.h"
#include "cli/commands.h"
#include "cli/escape.h"
#include "cli/verify_flag.h"
#include "core/files.h"
#include "grammar/grammar.h"
#include "runtime/engine.h"
#include "runtime/generator.h"

namespace kipp::cli {
namespace {

constexpr const char* kGenerateFooter = R"(
The prompt is used as is (no chat template) with special tokens parsed, so a raw ChatML
prompt works: -p $'<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n'.
Generation stops at the model's stop tokens (eos, <|im_end|>, <|endoftext|>; never printed),
at a --stop string (not printed), after --max-tokens tokens, or when the context is full.

Defaults (Qwen3's suggested non-thinking settings): --temp 0.7 --top-k 20 --top-p 0.8
--min-p 0, no penalties, --seed 0 (the same command gives the same text; change the seed for
other samples). --temp 0 is greedy decoding.

--spec turns on prompt-lookup speculative decoding: drafts are copied from earlier in the
prompt or the output and verified --draft at a time in one forward pass; the output is token
for token that of greedy decoding. It is greedy only: --spec without --temp uses --temp 0,
and any other --temp is an error. It pays off on copy-heavy output (quoting, repeating,
editing given text); an adaptive gate stops drafting while drafts are mostly rejected.

--ctx is the session's capacity in positions (K/V for all of it is allocated up front);
0 (default) means prompt + --max-tokens, at most the model's context length.

Text goes to stdout as it is produced; prompt and generated token counts, speeds, the finish
reason (stop_token, stop_string, length, context_full, grammar_complete) and, with --spec, the draft acceptance
go to stderr. --json prints one object at the end instead: text, finish_reason, tokens (ids
and texts; logprob and top_logprobs with --logprobs), usage, timings, speculative.

--json-schema FILE constrains the output to compact JSON valid against the JSON Schema in FILE
(the subset docs/SERVER.md lists), --json-object to any JSON object, --grammar FILE to a
llama.cpp GBNF grammar; generation ends when the grammar is complete (finish reason
grammar_complete), and --max-tokens is honoured by closing the output in time where the
grammar allows.

Examples:
  kipp generate -m qwen3-0.6b-bf16.gguf -p "The capital of France is" --max-tokens 32
  kipp generate -m qwen3-0.6b-bf16.gguf -p "Repeat: a b c d a b c d" --spec --json
  kipp generate -m qwen3-0.6b-bf16.gguf -p "A user as JSON:" --json-schema user.schema.json)";

struct GenerateArgs {
  std::string model;
  std::string prompt;
  std::optional<float> temperature;
  uint32_t top_k = 20;
  float top_p = 0.8f;
  float min_p = 0.0f;
  float repeat_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  uint64_t seed = 0;
  uint32_t max_tokens = 256;
  std::vector<std::string> stop;
  std::vector<std::string> logit_bias;
  std::optional<uint32_t> logprobs;
  bool spec = false;
  std::optional<uint32_t> draft;
  bool json = false;
  uint32_t ctx = 0;
  bool no_verify = false;
  BackendKind backend = BackendKind::Cpu;
  std::string json_schema_file;
  std::string grammar_file;
  bool json_object = false;
};

constexpr float kDefaultTemperature = 0.7f;

// "ID=BIAS" (BIAS may be negative, e.g. 151645=-100).
Expected<std::pair<uint32_t, float>> parse_logit_bias(const std::string& text) {
  const auto bad = [&] { return make_error("--logit-bias '" + text + "': expected ID=BIAS, e.g. 9707=-5"); };
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) return bad();
  const std::string id_text = text.substr(0, eq), bias_text = text.substr(eq + 1);
  if (id_text.find_first_not_of("0123456789") != std::string::npos || id_text.size() > 10) return bad();
  const unsigned long long id = std::stoull(id_text);
  if (id > UINT32_MAX) return bad();
  size_t used = 0;
  float bias = 0;
  try {
    bias = std::stof(bias_text, &used);
  } catch (const std::exception&) {
    return bad();
  }
  if (used != bias_text.size() || !std::isfinite(bias)) return bad();
  return std::pair<uint32_t, float>{static_cast<uint32_t>(id), bias};
}

std::string token_text(const Engine& engine, uint32_t id) {
  auto bytes = engine.tokenizer().token_to_bytes(id);
  return bytes.ok() ? *bytes : std::string();
}

double per_second(uint32_t count, double seconds) { return seconds > 0 ? count / seconds : 0.0; }

nlohmann::json result_json(const Engine& engine, const GenerateResult& result, bool logprobs, bool spec) {
  const GenerateStats& s = result.stats;
  nlohmann::json out;
  out["text"] = result.text;
  out["finish_reason"] = std::string(finish_reason_name(result.finish));
  out["stop_token"] = result.stop_token ? nlohmann::json(*result.stop_token) : nlohmann::json(nullptr);
  auto tokens = nlohmann::json::array();
  for (const SampledToken& token : result.tokens) {
    nlohmann::json entry{{"id", token.id}, {"text", token_text(engine, token.id)}};
    if (logprobs) {
      entry["logprob"] = token.logprob;
      auto top = nlohmann::json::array();
      for (const TokenLogprob& alt : token.top)
        top.push_back({{"id", alt.id}, {"text", token_text(engine, alt.id)}, {"logprob", alt.logprob}});
      entry["top_logprobs"] = std::move(top);
    }
    tokens.push_back(std::move(entry));
  }
  out["tokens"] = std::move(tokens);
  out["usage"] = {{"prompt_tokens", s.prompt_tokens},
                  {"completion_tokens", s.generated_tokens},
                  {"total_tokens", s.prompt_tokens + s.generated_tokens}};
  out["timings"] = {{"prefill_seconds", s.prefill_seconds},
                    {"decode_seconds", s.decode_seconds},
                    {"prefill_tokens_per_second", per_second(s.prompt_tokens, s.prefill_seconds)},
                    {"decode_tokens_per_second", per_second(s.generated_tokens, s.decode_seconds)},
                    {"decode_steps", s.decode_steps}};
  if (spec) {
    out["speculative"] = {{"drafted_tokens", s.drafted_tokens},
                          {"accepted_tokens", s.accepted_tokens},
                          {"draft_steps", s.draft_steps},
                          {"acceptance", s.drafted_tokens ? double(s.accepted_tokens) / s.drafted_tokens : 0.0}};
  }
  return out;
}

void print_stats(const Engine& engine, const GenerateResult& result, bool logprobs, bool spec) {
  const GenerateStats& s = result.stats;
  if (logprobs) {
    std::fprintf(stderr, "logprobs (id logprob text; alternatives):\n");
    for (const SampledToken& token : result.tokens) {
      std::string line = "  " + std::to_string(token.id) + " ";
      char value[32];
      std::snprintf(value, sizeof value, "%.4f", static_cast<double>(token.logprob));
      line += value + std::string(" \"") + escape_text(token_text(engine, token.id)) + "\"";
      for (const TokenLogprob& alt : token.top) {
        std::snprintf(value, sizeof value, "%.4f", static_cast<double>(alt.logprob));
        line += std::string("  ") + std::to_string(alt.id) + " " + value + " \"" +
                escape_text(token_text(engine, alt.id)) + "\"";
      }
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }
  std::fprintf(stderr, "prompt: %u tokens, %.3f s (%.1f tokens/s)\n", s.prompt_tokens, s.prefill_seconds,
               per_second(s.prompt_tokens, s.prefill_seconds));
  std::fprintf(stderr, "generated: %u tokens, %.3f s (%.1f tokens/s), %u decode steps\n", s.generated_tokens,
               s.decode_seconds, per_second(s.generated_tokens, s.decode_seconds), s.decode_steps);
  std::fprintf(stderr, "finish: %s\n", std::string(finish_reason_name(result.finish)).c_str());
  if (spec) {
    std::fprintf(stderr, "speculative: %u drafted, %u accepted (%.1f%%), %u steps with a draft\n", s.drafted_tokens,
                 s.accepted_tokens, s.drafted_tokens ? 100.0 * s.accepted_tokens / s.drafted_tokens : 0.0,
                 s.draft_steps);
  }
}

int run_generate(const GenerateArgs& args) {
  if (args.prompt.empty()) return fail("--prompt is empty: there is nothing to continue from");
  if (args.draft && !args.spec) return fail("--draft needs --spec");
  if (args.draft && *args.draft == 0) return fail("--draft must be at least 1");
  if (args.logprobs && *args.logprobs > 20)
    return fail("--logprobs: expected 0..20 alternatives, found " + std::to_string(*args.logprobs));

  GenerateOptions options;
  SamplingParams& sampling = options.sampling;
  sampling.temperature = args.temperature.value_or(args.spec ? 0.0f : kDefaultTemperature);
  sampling.top_k = args.top_k;
  sampling.top_p = args.top_p;
  sampling.min_p = args.min_p;
  sampling.repetition_penalty = args.repeat_penalty;
  sampling.frequency_penalty = args.frequency_penalty;
  sampling.presence_penalty = args.presence_penalty;
  sampling.seed = args.seed;
  sampling.top_logprobs = args.logprobs.value_or(0);
  for (const std::string& bias : args.logit_bias) {
    auto parsed = parse_logit_bias(bias);
    if (!parsed.ok()) return fail(parsed.message());
    sampling.logit_bias.push_back(*parsed);
  }
  options.max_tokens = args.max_tokens;
  options.stop = args.stop;
  const int constraints = !args.json_schema_file.empty() + !args.grammar_file.empty() + args.json_object;
  if (constraints > 1) return fail("--json-schema, --json-object and --grammar exclude each other");
  if (!args.json_schema_file.empty() || !args.grammar_file.empty()) {
    const bool schema = !args.json_schema_file.empty();
    const std::string& file = schema ? args.json_schema_file : args.grammar_file;
    auto text = read_text_file(file);
    if (!text.ok()) return fail(text.message());
    auto compiled = schema ? grammar::compile_json_schema(*text) : grammar::compile_gbnf(*text);
    if (!compiled.ok()) return fail(file + ": " + compiled.message());
    options.grammar = std::move(*compiled);
  } else if (args.json_object) {
    options.grammar = grammar::any_json_object();
  }
  options.speculative.enabled = args.spec;
  if (args.draft) options.speculative.max_draft = *args.draft;
  if (args.spec && sampling.temperature != 0.0f) {
    char found[32];
    std::snprintf(found, sizeof found, "%g", static_cast<double>(sampling.temperature));
    return fail(std::string("--spec is greedy only: it needs --temp 0 (or no --temp), found --temp ") + found);
  }

  EngineOptions engine_options;
  engine_options.backend = args.backend;
  engine_options.verify_content_hash = !args.no_verify;
  auto engine = Engine::open(args.model, engine_options);
  if (!engine.ok()) return fail(engine.message());
  if (Status valid = sampling.validate((*engine)->vocab_size()); !valid.ok()) return fail(valid.message());
  auto prompt = (*engine)->tokenize(args.prompt);
  if (!prompt.ok()) return fail("--prompt: " + prompt.message());
  if (prompt->empty()) return fail("--prompt gives no tokens");

  const uint32_t context = (*engine)->config().context_length;
  uint64_t capacity = args.ctx;
  if (capacity == 0) capacity = std::min<uint64_t>(context, prompt->size() + uint64_t{args.max_tokens});
  if (capacity > context)
    return fail("--ctx " + std::to_string(capacity) + " exceeds the model's context length " + std::to_string(context));
  if (prompt->size() > capacity)
    return fail("the prompt has " + std::to_string(prompt->size()) + " tokens, more than the context of " +
                std::to_string(capacity) + (args.ctx ? " (--ctx)" : " (the model's context length)"));
  SessionOptions session_options;
  session_options.capacity = static_cast<uint32_t>(capacity);
  auto session = (*engine)->create_session(session_options);
  if (!session.ok()) return fail(session.message());

  bool write_failed = false;
  bool ends_with_newline = true;
  TextCallback stream;
  if (!args.json) {
    stream = [&](std::string_view text) {
      if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
        write_failed = true;
        return false;
      }
      ends_with_newline = text.back() == '\n';
      return true;
    };
  }
  auto result = generate(**engine, **session, *prompt, options, stream);
  if (!result.ok()) {
    if (!ends_with_newline) std::fputc('\n', stderr);
    return fail(result.message());
  }
  if (write_failed) return fail("cannot write to standard output");
  if (args.json) {
    const auto out = result_json(**engine, *result, args.logprobs.has_value(), args.spec);
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  if (!ends_with_newline) std::fputc('\n', stderr);  // the statistics start on a line of their own
  print_stats(**engine, *result, args.logprobs.has_value(), args.spec);
  return 0;
}

}  // namespace

void register_generate(CLI::App& app, Action& action) {
  auto* command = app.add_subcommand("generate", "Generate text from a prompt (sampling, stop strings, --spec)");
  command->footer(kGenerateFooter);
  auto args = std::make_shared<GenerateArgs>();
  auto temperature = std::make_shared<float>(kDefaultTemperature);
  auto logprobs = std::make_shared<uint32_t>(0);
  auto draft = std::make_shared<uint32_t>(8);
  command->add_option("-m,--model", args->model, "Kipp GGUF to generate with")->required();
  command->add_option("-p,--prompt", args->prompt, "Prompt text (special tokens parsed; no chat template)")->required();
  auto* temp_option = command->add_option("--temp", *temperature, "Temperature; 0 is greedy")->capture_default_str();
  command->add_option("--top-k", args->top_k, "Keep the k most likely tokens (0: off)")->capture_default_str();
  command->add_option("--top-p", args->top_p, "Nucleus: keep the most likely tokens up to this mass (1: off)")
      ->capture_default_str();
  command->add_option("--min-p", args->min_p, "Drop tokens below min-p times the best one's probability")
      ->capture_default_str();
  command
      ->add_option("--repeat-penalty", args->repeat_penalty,
                   "CTRL-style repetition penalty over the last 64 tokens (1: off)")
      ->capture_default_str();
  command->add_option("--frequency-penalty", args->frequency_penalty, "Minus count times this, over the last 64 tokens")
      ->capture_default_str();
  command->add_option("--presence-penalty", args->presence_penalty, "Minus this for tokens seen in the last 64")
      ->capture_default_str();
  command->add_option("--seed", args->seed, "Random seed of the sampler")->capture_default_str();
  command->add_option("--max-tokens", args->max_tokens, "Most tokens to generate")->capture_default_str();
  command->add_option("--stop", args->stop, "Stop string (repeatable); not printed");
  command->add_option("--logit-bias", args->logit_bias, "ID=BIAS added to the token's logit (repeatable)");
  auto* logprobs_option =
      command->add_option("--logprobs", *logprobs, "Report each token's logprob and N alternatives (0..20)");
  command->add_flag("--spec", args->spec, "Prompt-lookup speculative decoding (greedy only; identical output)");
  auto* draft_option =
      command->add_option("--draft", *draft, "With --spec: most draft tokens per step")->capture_default_str();
  command->add_option("--json-schema", args->json_schema_file, "Constrain the output to this JSON Schema (a file)");
  command->add_flag("--json-object", args->json_object, "Constrain the output to a JSON object");
  command->add_option("--grammar", args->grammar_file, "Constrain the output to this GBNF grammar (a file)");
  command->add_flag("--json", args->json, "Print one JSON object at the end instead of streaming");
  command->add_option("--ctx", args->ctx, "Context (session capacity) in positions; 0: prompt + --max-tokens")
      ->capture_default_str();
  add_backend_option(*command, args->backend);
  add_no_verify_flag(*command, args->no_verify);
  command->callback([&action, args, temperature, logprobs, draft, temp_option, logprobs_option, draft_option] {
    GenerateArgs chosen = *args;
    if (temp_option->count() > 0) chosen.temperature = *temperature;
    if (logprobs_option->count() > 0) chosen.logprobs = *logprobs;
    if (draft_option->count() > 0) chosen.draft = *draft;
    action = [chosen] { return run_generate(chosen); };
  });
}

}  // namespace kipp::cli
