// Mask computation per token over a model's real vocabulary: seeded random walks through the
// grammar (half the time a one-byte token when one is allowed, so that structure progresses;
// otherwise any allowed token), each with a token budget so that it ends complete, timing every
// fill_mask and accept. Cases: free JSON (any JSON object) and a deeply nested schema (objects in
// arrays in objects, enums, bounded strings, bounded integers and numbers, anyOf, a format), and
// two GBNF free-text grammars (a bounded line of any characters, lines of a small class).
// Each repeat runs the same walks; the result holds every repeat and the medians across them.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "grammar/grammar.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace {

using kipp::bench::Clock;
using kipp::bench::median;
using kipp::bench::must;
namespace g = kipp::grammar;

[[noreturn]] void die(const std::string& message) { kipp::bench::die("grammar_mask_bench", message); }

const char* kNestedSchema = R"({"type":"object","properties":{
  "company":{"type":"string","maxLength":40},
  "founded":{"type":"integer","minimum":1800,"maximum":2025},
  "departments":{"type":"array","minItems":1,"maxItems":4,"items":{"type":"object","properties":{
    "name":{"type":"string","minLength":1,"maxLength":30},
    "kind":{"enum":["engineering","sales","support","research"]},
    "teams":{"type":"array","maxItems":3,"items":{"type":"object","properties":{
      "lead":{"type":"object","properties":{
        "name":{"type":"string","maxLength":24},
        "age":{"type":"integer","minimum":18,"maximum":99},
        "contact":{"anyOf":[{"type":"string","format":"email"},{"type":"null"}]}},
        "required":["name","age"],"additionalProperties":false},
      "members":{"type":"array","maxItems":5,"items":{"type":"object","properties":{
        "name":{"type":"string","maxLength":24},
        "level":{"type":"integer","minimum":1,"maximum":7},
        "skills":{"type":"array","maxItems":3,"items":{"enum":["c++","python","sql","ml","ops"]}}},
        "required":["name","level"],"additionalProperties":false}},
      "budget":{"type":"number","minimum":0,"maximum":1000000}},
      "required":["lead","members"],"additionalProperties":false}}},
    "required":["name","kind","teams"],"additionalProperties":false}}},
  "required":["company","founded","departments"],"additionalProperties":false})";

const char* kUsage =
    "Usage: grammar_mask_bench --model GGUF [options]\n"
    "Times the grammar matcher's mask per token over the model's vocabulary.\n"
    "  --model GGUF     the model whose tokenizer gives the vocabulary (required)\n"
    "  --walks N        random walks per case and repeat (default 20)\n"
    "  --budget N       token budget of each walk (default 300)\n"
    "  --repeats N      repeats of every case (default 3)\n"
    "  --out FILE.json  also write the result there (it always goes to standard output)\n"
    "  --help           this text\n";

const std::pair<const char*, const char*> kFreeText[] = {
    {"gbnf_line", "root ::= \"say: \" [^\\n]{0,200} \"\\n\""},
    {"gbnf_text_lines", "root ::= ([a-zA-Z ,.]+ \"\\n\")+"},
};

struct Times {
  std::vector<double> mask_us;
  std::vector<double> accept_us;
  size_t walks_ended = 0;
};

Times run_walks(const g::GrammarPtr& grammar, const std::shared_ptr<const g::TokenVocabulary>& vocabulary,
                const std::vector<std::string>& bytes, size_t walks, uint32_t budget) {
  Times times;
  std::vector<uint32_t> mask((vocabulary->size() + 31) / 32);
  const auto ends = vocabulary->end_tokens();
  for (size_t w = 0; w < walks; ++w) {
    g::Matcher matcher(grammar, vocabulary);
    std::mt19937_64 rng(w);
    for (uint32_t used = 0; used < budget; ++used) {
      const auto start = Clock::now();
      matcher.fill_mask(mask, budget - used);
      times.mask_us.push_back(kipp::bench::seconds_since(start) * 1e6);
      std::vector<uint32_t> ids, short_ids;
      for (uint32_t id = 0; id < vocabulary->size(); ++id) {
        if (!((mask[id / 32] >> (id % 32)) & 1)) continue;
        ids.push_back(id);
        if (bytes[id].size() == 1 || std::find(ends.begin(), ends.end(), id) != ends.end()) short_ids.push_back(id);
      }
      if (ids.empty()) die("an empty mask");
      const auto& pool = !short_ids.empty() && rng() % 2 == 0 ? short_ids : ids;
      const uint32_t id = pool[rng() % pool.size()];
      if (std::find(ends.begin(), ends.end(), id) != ends.end()) break;
      const auto accept_start = Clock::now();
      if (!matcher.accept(id).ok()) die("an allowed token was refused");
      times.accept_us.push_back(kipp::bench::seconds_since(accept_start) * 1e6);
    }
    if (!matcher.accepting()) die("a walk ended incomplete");
    ++times.walks_ended;
  }
  return times;
}

nlohmann::json summary(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (const double v : us) sum += v;
  const size_t n = us.size();
  return {{"count", n},
          {"mean_us", n ? sum / static_cast<double>(n) : 0.0},
          {"median_us", n ? median(us) : 0.0},
          {"p99_us", n ? us[std::min(n - 1, n * 99 / 100)] : 0.0},
          {"max_us", n ? us.back() : 0.0}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, out;
  size_t walks = 20, repeats = 3;
  uint32_t budget = 300;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--model") {
      model_path = kipp::bench::option_value("grammar_mask_bench", argc, argv, i);
    } else if (arg == "--walks") {
      walks = kipp::bench::parse_count("grammar_mask_bench",
                                       kipp::bench::option_value("grammar_mask_bench", argc, argv, i), "--walks");
    } else if (arg == "--budget") {
      budget = static_cast<uint32_t>(kipp::bench::parse_count(
          "grammar_mask_bench", kipp::bench::option_value("grammar_mask_bench", argc, argv, i), "--budget"));
    } else if (arg == "--repeats") {
      repeats = kipp::bench::parse_count("grammar_mask_bench",
                                         kipp::bench::option_value("grammar_mask_bench", argc, argv, i), "--repeats");
    } else if (arg == "--out") {
      out = kipp::bench::option_value("grammar_mask_bench", argc, argv, i);
    } else {
      die("unknown option " + arg);
    }
  }
  if (model_path.empty()) die("--model GGUF is required");
  const kipp::Model model = must(kipp::Model::open(model_path), "opening " + model_path);
  const kipp::Tokenizer tokenizer = must(kipp::Tokenizer::create(model.tokenizer()), "tokenizer");
  std::vector<std::string> bytes;
  std::vector<bool> excluded;
  for (uint32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    auto piece = tokenizer.token_to_bytes(id);
    bytes.push_back(piece.ok() ? *piece : "");
    excluded.push_back(!piece.ok() || tokenizer.is_special_token(id));
  }
  const auto build_start = Clock::now();
  const auto vocabulary = g::TokenVocabulary::build(bytes, excluded, {model.tokenizer().eos_token_id});
  const double build_ms = kipp::bench::seconds_since(build_start) * 1e3;
  const auto compile_start = Clock::now();
  const g::GrammarPtr nested = must(g::compile_json_schema(kNestedSchema), "the nested schema");
  const double compile_ms = kipp::bench::seconds_since(compile_start) * 1e3;
  std::vector<std::pair<std::string, g::GrammarPtr>> cases = {{"json_object", g::any_json_object()},
                                                              {"nested_schema", nested}};
  for (const auto& [name, text] : kFreeText) cases.push_back({name, must(g::compile_gbnf(text), name)});

  nlohmann::json result;
  kipp::bench::record_machine_and_command(result, "grammar_mask_bench", argc, argv);
  result["model"] = model_path;
  result["vocabulary"] = vocabulary->size();
  result["settings"] = {{"walks", walks}, {"budget_tokens", budget}, {"repeats", repeats}};
  result["vocabulary_build_ms"] = build_ms;
  result["nested_schema_compile_ms"] = compile_ms;
  result["nested_schema"] = nlohmann::json::parse(kNestedSchema);
  for (const auto& [name, text] : kFreeText) result["gbnf"][name] = text;
  nlohmann::json& out_cases = result["cases"];
  for (const auto& [name, grammar] : cases) {
    nlohmann::json runs = nlohmann::json::array();
    std::vector<double> means, medians, p99s, maxima, accepts;
    for (size_t r = 0; r < repeats; ++r) {
      const Times t = run_walks(grammar, vocabulary, bytes, walks, budget);
      nlohmann::json run = {
          {"mask", summary(t.mask_us)}, {"accept", summary(t.accept_us)}, {"walks_ended", t.walks_ended}};
      means.push_back(run["mask"]["mean_us"].get<double>());
      medians.push_back(run["mask"]["median_us"].get<double>());
      p99s.push_back(run["mask"]["p99_us"].get<double>());
      maxima.push_back(run["mask"]["max_us"].get<double>());
      accepts.push_back(run["accept"]["mean_us"].get<double>());
      runs.push_back(run);
      std::fprintf(stderr,
                   "%s repeat %zu: mask mean %.1f us, median %.1f us, p99 %.1f us, max %.1f us over %zu masks\n",
                   name.c_str(), r + 1, means.back(), medians.back(), p99s.back(), maxima.back(), t.mask_us.size());
    }
    out_cases.push_back({{"name", name},
                         {"median_of_repeats",
                          {{"mask_mean_us", median(means)},
                           {"mask_median_us", median(medians)},
                           {"mask_p99_us", median(p99s)},
                           {"mask_max_us", median(maxima)},
                           {"accept_mean_us", median(accepts)}}},
                         {"repeats", runs}});
  }
  kipp::bench::write_result("grammar_mask_bench", result, out);
  return 0;
}
