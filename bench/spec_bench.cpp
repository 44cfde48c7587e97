// Prompt-lookup speculative decoding against plain greedy decoding on one GGUF: the same
// prompts, side by side in one run (plain and --spec interleaved per repeat), medians of
// --repeats runs. Every speculative run must give exactly the plain run's tokens (the bench
// fails otherwise). Copy-heavy prompts (repeat a list, repeat code, a long repeated context)
// and ones that give nothing to copy (free text; free text with penalties that discourage the
// repetition greedy decoding falls into), and a "ceiling" case whose output a logit bias makes
// repetitive, so that every draft is accepted.
//
// The prompt's full 32-token blocks are evaluated once and shared through the engine's pooled
// mode, so a run re-evaluates only the prompt's last partial block: the timings are dominated
// by decoding, which is what speculative decoding changes.
//
// Usage: spec_bench --model GGUF [--max-tokens 64] [--repeats 3] [--draft 8] [--out FILE.json]
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "runtime/engine.h"
#include "runtime/generator.h"

namespace {

using kipp::bench::Clock;
using kipp::bench::median;
using kipp::bench::must;
using kipp::bench::seconds_since;

[[noreturn]] void die(const std::string& message) { kipp::bench::die("spec_bench", message); }

struct Case {
  std::string name;
  std::string kind;  // "copy-heavy" or "no-copy" (the prompt's design; acceptance is measured)
  std::string prompt;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<uint32_t, float>> logit_bias;
};

std::string chat(const std::string& user, const std::string& assistant_start) {
  return "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n" + assistant_start;
}

std::vector<Case> cases() {
  const char* fruits[] = {"apples",  "pears",    "plums", "cherries", "grapes", "lemons", "limes",   "mangoes",
                          "peaches", "apricots", "figs",  "dates",    "kiwis",  "melons", "oranges", "papayas"};
  std::string list;
  for (int i = 0; i < 16; ++i) list += std::to_string(i + 1) + ". " + fruits[i] + "\n";
  const std::string code =
      "def mean(values):\n    total = 0\n    for v in values:\n        total += v\n    return total / len(values)\n\n"
      "def variance(values):\n    m = mean(values)\n    return sum((v - m) ** 2 for v in values) / len(values)\n";
  const std::string paragraph =
      "The lighthouse keeper climbed the spiral stairs every evening at dusk, trimmed the wick, polished the "
      "great lens and wrote the weather into his log before the first ships passed the rocks. ";
  std::string context;
  for (int i = 0; i < 4; ++i) context += paragraph;
  const std::string story = chat("Write a short story about a lighthouse keeper who finds a message in a bottle.", "");
  // A random-weight model does not copy its prompt; a large bias on one token makes greedy output
  // repeat it, so every draft is accepted: the mechanism's ceiling on this machine.
  const uint32_t hello = 9707;  // "Hello" in the Qwen3 vocabulary
  return {
      {"forced_repetition_bias", "ceiling", "Say hello:", 1.0f, 0.0f, 0.0f, {{hello, 100.0f}}},
      {"repeat_list",
       "copy-heavy",
       chat("Repeat this list exactly:\n" + list, list.substr(0, list.find("4."))),
       1.0f,
       0.0f,
       0.0f,
       {}},
      {"repeat_code",
       "copy-heavy",
       chat("Repeat this code exactly:\n" + code, code.substr(0, code.find("def variance"))),
       1.0f,
       0.0f,
       0.0f,
       {}},
      {"long_repeated_context", "copy-heavy", context + paragraph.substr(0, 60), 1.0f, 0.0f, 0.0f, {}},
      {"free_text", "no-copy", story, 1.0f, 0.0f, 0.0f, {}},
      {"free_text_penalized", "no-copy", story, 1.3f, 1.0f, 0.0f, {}},
      {"free_text_strong_penalties", "no-copy", story, 1.5f, 2.0f, 1.0f, {}},
  };
}

struct Run {
  std::vector<uint32_t> tokens;
  double wall = 0, decode = 0;
  kipp::GenerateStats stats;
};

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, out_path;
  uint32_t max_tokens = 64, repeats = 3, draft = 8;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] { return kipp::bench::option_value("spec_bench", argc, argv, i); };
    if (arg == "--model")
      model_path = value();
    else if (arg == "--max-tokens")
      max_tokens = static_cast<uint32_t>(std::stoul(value()));
    else if (arg == "--repeats")
      repeats = static_cast<uint32_t>(std::stoul(value()));
    else if (arg == "--draft")
      draft = static_cast<uint32_t>(std::stoul(value()));
    else if (arg == "--out")
      out_path = value();
    else if (arg == "--help" || arg == "-h") {
      std::cout << "usage: spec_bench --model GGUF [--max-tokens 64] [--repeats 3] [--draft 8] [--out FILE.json]\n";
      return 0;
    } else
      die("unknown argument " + arg);
  }
  if (model_path.empty()) die("--model is required");
  if (repeats == 0 || max_tokens == 0 || draft == 0) die("--repeats, --max-tokens and --draft must be positive");

  nlohmann::json result;
  kipp::bench::record_machine_and_command(result, "spec_bench", argc, argv);
  result["model"] = model_path;
  result["note"] =
      "Synthetic checkpoints have random weights: greedy output is not meaningful text, and acceptance reflects how "
      "often such a model falls into repetition, not how a trained model copies its prompt.";

  kipp::EngineOptions options;
  options.verify_content_hash = false;
  options.pool_blocks = 64;
  auto engine = must(kipp::Engine::open(model_path, options), "opening " + model_path);
  result["backend"] = engine->backend().name();
  result["settings"] = {{"max_tokens", max_tokens},
                        {"repeats", repeats},
                        {"max_draft", draft},
                        {"ngram_min", kipp::SpeculativeOptions{}.ngram_min},
                        {"ngram_max", kipp::SpeculativeOptions{}.ngram_max},
                        {"min_acceptance", kipp::SpeculativeOptions{}.min_acceptance}};

  kipp::SessionOptions pooled;
  pooled.pooled = true;
  auto run = [&](const std::vector<uint32_t>& prompt, const kipp::GenerateOptions& generate_options) {
    auto session = must(engine->create_session(pooled), "creating a session");
    const auto start = Clock::now();
    const uint32_t adopted = must(session->match_prefix(prompt), "adopting the prompt's blocks");
    const std::span<const uint32_t> rest = std::span<const uint32_t>(prompt).subspan(adopted);
    auto generated = must(kipp::generate(*engine, *session, rest, generate_options), "generating");
    Run out;
    out.wall = seconds_since(start);
    out.decode = generated.stats.decode_seconds;
    out.stats = generated.stats;
    for (const auto& t : generated.tokens) out.tokens.push_back(t.id);
    return out;
  };

  nlohmann::json rows = nlohmann::json::array();
  for (const Case& c : cases()) {
    const std::vector<uint32_t> prompt = must(engine->tokenize(c.prompt), "tokenizing " + c.name);
    {  // publish the prompt's full blocks once
      auto warm = must(engine->create_session(pooled), "creating a session");
      std::vector<float> logits(engine->vocab_size());
      const auto warm_start = Clock::now();
      if (auto st = warm->eval(prompt, 1, logits.data()); !st.ok()) die("prefill: " + st.message());
      std::cerr << c.name << ": " << prompt.size() << " prompt tokens prefilled once in " << seconds_since(warm_start)
                << " s\n";
    }
    kipp::GenerateOptions plain;
    plain.sampling.temperature = 0;
    plain.sampling.repetition_penalty = c.repetition_penalty;
    plain.sampling.presence_penalty = c.presence_penalty;
    plain.sampling.frequency_penalty = c.frequency_penalty;
    plain.sampling.logit_bias = c.logit_bias;
    plain.max_tokens = max_tokens;
    plain.stop_tokens = {engine->vocab_size() - 1};  // a fixed token count: no early stop on eos
    kipp::GenerateOptions spec = plain;
    spec.speculative.enabled = true;
    spec.speculative.max_draft = draft;

    std::vector<double> plain_wall, spec_wall, plain_decode, spec_decode;
    Run last_spec, last_plain;
    for (uint32_t r = 0; r < repeats; ++r) {
      last_plain = run(prompt, plain);
      last_spec = run(prompt, spec);
      if (last_plain.tokens != last_spec.tokens) die(c.name + ": speculative output differs from plain greedy");
      plain_wall.push_back(last_plain.wall);
      spec_wall.push_back(last_spec.wall);
      plain_decode.push_back(last_plain.decode);
      spec_decode.push_back(last_spec.decode);
      std::cerr << c.name << " repeat " << r + 1 << "/" << repeats << ": plain " << last_plain.wall << " s, spec "
                << last_spec.wall << " s\n";
    }
    const kipp::GenerateStats& s = last_spec.stats;
    const double pw = median(plain_wall), sw = median(spec_wall), pd = median(plain_decode), sd = median(spec_decode);
    nlohmann::json row{{"name", c.name},
                       {"kind", c.kind},
                       {"prompt_tokens", prompt.size()},
                       {"generated_tokens", last_plain.tokens.size()},
                       {"identical_output", true},
                       {"plain",
                        {{"median_wall_seconds", pw},
                         {"median_decode_seconds", pd},
                         {"decode_tokens_per_second", static_cast<double>(last_plain.tokens.size()) / pd},
                         {"decode_steps", last_plain.stats.decode_steps}}},
                       {"spec",
                        {{"median_wall_seconds", sw},
                         {"median_decode_seconds", sd},
                         {"decode_tokens_per_second", static_cast<double>(last_spec.tokens.size()) / sd},
                         {"decode_steps", s.decode_steps},
                         {"draft_steps", s.draft_steps},
                         {"drafted_tokens", s.drafted_tokens},
                         {"accepted_tokens", s.accepted_tokens},
                         {"acceptance", s.drafted_tokens ? double(s.accepted_tokens) / s.drafted_tokens : 0.0}}},
                       {"speedup_wall", pw / sw},
                       {"speedup_decode", pd / sd}};
    if (!c.logit_bias.empty()) row["logit_bias"] = c.logit_bias;
    if (c.repetition_penalty != 1.0f || c.presence_penalty != 0.0f || c.frequency_penalty != 0.0f)
      row["penalties"] = {
          {"repetition", c.repetition_penalty}, {"presence", c.presence_penalty}, {"frequency", c.frequency_penalty}};
    rows.push_back(row);
    std::fprintf(stderr, "%-22s %-14s plain %7.3f s  spec %7.3f s  speed-up %.2fx (decode %.2fx)  accepted %u/%u\n",
                 c.name.c_str(), c.kind.c_str(), pw, sw, pw / sw, pd / sd, s.accepted_tokens, s.drafted_tokens);
  }
  result["cases"] = rows;

  kipp::bench::write_result("spec_bench", result, out_path);
  return 0;
}
