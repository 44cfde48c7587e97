// The matcher over the real Qwen3 vocabulary: random walks through the masks always end in
// output that parses and satisfies the schema (checked by an independent validator), within
// the token budget when one is given; and the fast mask (trie walk, plain-string bitsets) is
// bit for bit the reference mask that steps every token on its own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher_state.h"
#include "unit/grammar/grammar_test_support.h"

namespace kipp::grammar {
namespace {

using testing::qwen_vocabulary;

const std::vector<std::string>& walk_schemas() {
  static const std::vector<std::string> schemas = {
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":130}},"required":["name","age"],"additionalProperties":false})",
      R"({"type":"array","items":{"type":"number","minimum":-2.5,"exclusiveMaximum":7},"minItems":1,"maxItems":4})",
      R"({"type":"object","properties":{"tags":{"type":"array","items":{"enum":["a","bb","ccc"]},"maxItems":3},"ok":{"type":"boolean"},"note":{"type":["string","null"],"minLength":2,"maxLength":5}},"required":["ok","note"]})",
      R"({"anyOf":[{"type":"integer","minimum":10,"maximum":99},{"type":"string","minLength":3,"maxLength":3},{"type":"null"}]})",
      R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","minimum":-5,"maximum":5},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}}})",
      R"({"type":"object","properties":{"id":{"type":"string","format":"uuid"},"day":{"type":"string","format":"date"},"code":{"type":"string","pattern":"^[A-Z]{2}\\d{2,4}$"}},"required":["id","day","code"]})",
      R"({"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"array","items":{"type":"object","properties":{"c":{"type":"string","minLength":1,"maxLength":8},"d":{"oneOf":[{"type":"integer","exclusiveMinimum":0,"maximum":1000},{"type":"boolean"}]}},"required":["c","d"]},"minItems":1,"maxItems":2}},"required":["b"]}},"required":["a"]})",
      R"({"type":"object","additionalProperties":{"type":"string","maxLength":4}})",
      R"({"type":"string","minLength":5,"maxLength":40})",
      R"({"type":"number"})",
      R"({"type":"object","properties":{"mail":{"type":"string","format":"email"},"slug":{"type":"string","pattern":"^[a-z0-9._-]+@[a-z]{0,12}$"},"word":{"type":"string","pattern":"^[à-ÿa-z€]{1,6}!?$"}},"required":["mail","slug","word"],"additionalProperties":false})",
  };
  return schemas;
}

std::vector<uint32_t> allowed(const std::vector<uint32_t>& mask, uint32_t size) {
  std::vector<uint32_t> ids;
  for (uint32_t id = 0; id < size; ++id)
    if ((mask[id / 32] >> (id % 32)) & 1) ids.push_back(id);
  return ids;
}

struct Walk {
  std::string text;
  bool ended = false;
  uint32_t tokens = 0;  // the end token included
};

// Random tokens from the masks; half the time a one-byte token when one is allowed, so that
// walks without a budget also make structural progress.
Walk random_walk(const GrammarPtr& grammar, uint64_t seed, uint32_t budget, uint32_t max_tokens) {
  auto vocabulary = qwen_vocabulary();
  const auto& impl = vocabulary->impl();
  Matcher matcher(grammar, vocabulary);
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> mask((vocabulary->size() + 31) / 32);
  Walk walk;
  while (walk.tokens < max_tokens) {
    matcher.fill_mask(mask, budget == UINT32_MAX ? UINT32_MAX : budget - walk.tokens);
    const std::vector<uint32_t> ids = allowed(mask, vocabulary->size());
    EXPECT_FALSE(ids.empty()) << "empty mask after '" << walk.text << "'";
    if (ids.empty()) break;
    std::vector<uint32_t> short_ids;
    for (const uint32_t id : ids)
      if (impl.bytes[id].size() == 1 || impl.is_end[id]) short_ids.push_back(id);
    const auto& pool = !short_ids.empty() && rng() % 2 == 0 ? short_ids : ids;
    const uint32_t id = pool[rng() % pool.size()];
    ++walk.tokens;
    if (impl.is_end[id]) {
      EXPECT_TRUE(matcher.accepting());
      walk.ended = true;
      break;
    }
    const Status accepted = matcher.accept(id);
    EXPECT_TRUE(accepted.ok()) << accepted.message();
    walk.text += impl.bytes[id];
    if (budget != UINT32_MAX) {
      EXPECT_LE(matcher.min_bytes_to_accept(), budget - walk.tokens) << "after '" << walk.text << "'";
    }
    if (matcher.done()) {
      // Nothing may follow: the mask holds the end tokens only.
      matcher.fill_mask(mask, UINT32_MAX);
      const std::vector<uint32_t> rest = allowed(mask, vocabulary->size());
      for (const uint32_t r : rest) EXPECT_TRUE(impl.is_end[r]) << r;
    }
  }
  // A budget spent on an accepting output ends it too (the sequence stops at its length limit).
  if (!walk.ended && walk.tokens == budget && matcher.accepting()) walk.ended = true;
  return walk;
}

void expect_valid(const std::string& schema_text, const Walk& walk) {
  ASSERT_TRUE(walk.ended) << schema_text << " did not end: " << walk.text;
  const nlohmann::json value = nlohmann::json::parse(walk.text, nullptr, false);
  ASSERT_FALSE(value.is_discarded()) << schema_text << " gave invalid JSON: " << walk.text;
  bool in_string = false, escaped = false;
  for (const char c : walk.text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else {
      EXPECT_TRUE(c != ' ' && c != '\n' && c != '\t' && c != '\r') << "not compact: " << walk.text;
      in_string = c == '"';
    }
  }
  const nlohmann::json schema = nlohmann::json::parse(schema_text);
  EXPECT_EQ(testing::violation(schema, value, schema), "") << schema_text << "\n" << walk.text;
}

// Writes {schema, output} lines for tests/grammar/validate_walks.mjs (ajv) when KIPP_GRAMMAR_WALKS
// names a file.
void record(const std::string& schema, const std::string& output) {
  const char* path = std::getenv("KIPP_GRAMMAR_WALKS");
  if (!path || !*path) return;
  std::ofstream out(path, std::ios::app);
  out << nlohmann::json{{"schema", nlohmann::json::parse(schema)}, {"output", output}}.dump() << "\n";
}

TEST(GrammarWalks, EveryWalkEndsValidWithinItsBudget) {
  for (size_t s = 0; s < walk_schemas().size(); ++s) {
    const std::string& schema = walk_schemas()[s];
    const GrammarPtr grammar = testing::schema_grammar(schema);
    for (uint64_t seed = 0; seed < 6; ++seed) {
      const uint32_t shortest = Matcher(grammar, qwen_vocabulary()).min_bytes_to_accept();
      const uint32_t budget = shortest + 1 + static_cast<uint32_t>((seed * 37 + s * 11) % 60);
      const Walk walk = random_walk(grammar, seed * 1000 + s, budget, budget);
      EXPECT_LE(walk.tokens, budget);
      expect_valid(schema, walk);
      if (walk.ended) record(schema, walk.text);
    }
  }
}

TEST(GrammarWalks, BoundedSchemasEndWithoutABudget) {
  for (const size_t s : {0u, 1u, 3u, 6u}) {
    const std::string& schema = walk_schemas()[s];
    const GrammarPtr grammar = testing::schema_grammar(schema);
    for (uint64_t seed = 0; seed < 4; ++seed) expect_valid(schema, random_walk(grammar, seed, UINT32_MAX, 2000));
  }
}

TEST(GrammarWalks, JsonObjectAndToolCallsEndWithinTheBudget) {
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const Walk walk = random_walk(any_json_object(), seed, 40, 40);
    ASSERT_TRUE(walk.ended) << walk.text;
    EXPECT_LE(walk.tokens, 40u);
    const nlohmann::json value = nlohmann::json::parse(walk.text, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << walk.text;
    EXPECT_TRUE(value.is_object());
  }
  const ToolSpec tools[] = {{"f", walk_schemas()[0]}, {"g", ""}};
  const GrammarPtr calls = compile_tool_calls(tools, 2).value();
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const Walk walk = random_walk(calls, seed, 120, 120);
    ASSERT_TRUE(walk.ended) << walk.text;
    const size_t open = walk.text.find("\"arguments\": ");
    ASSERT_EQ(walk.text.rfind("<tool_call>\n{\"name\": \"", 0), 0u) << walk.text;
    ASSERT_NE(open, std::string::npos);
  }
}

// Free text by repeated character classes: bounded and not, ASCII and multi-byte, and classes
// whose repetition is followed by something that may start with a class character.
const std::vector<std::string>& class_grammars() {
  static const std::vector<std::string> grammars = {
      "root ::= \"say: \" [^\\n]{0,200} \"\\n\"",  "root ::= ([a-zA-Z ,.]+ \"\\n\")+",
      "root ::= line+\nline ::= [^\\n]* \"\\n\"",  "root ::= [a-z]{0,12} [a-z0-9]* \".\"",
      "root ::= \"x\" [0-9]{2,5} [0-9a-f]? \"!\"", "root ::= [α-ωа-я ]+ \"。\" [^\\x00-\\x7F]{1,3}",
  };
  return grammars;
}

TEST(GrammarMask, FastMaskEqualsTheReferenceMask) {
  auto vocabulary = qwen_vocabulary();
  std::vector<uint32_t> fast((vocabulary->size() + 31) / 32), slow(fast.size());
  std::vector<GrammarPtr> grammars{any_json_object()};
  for (const size_t s : {0u, 2u, 4u, 5u, 6u, 7u, 10u}) grammars.push_back(testing::schema_grammar(walk_schemas()[s]));
  for (const std::string& text : class_grammars()) grammars.push_back(compile_gbnf(text).value());
  std::mt19937_64 rng(7);
  int compared = 0;
  for (const GrammarPtr& grammar : grammars) {
    for (int walk = 0; walk < 2; ++walk) {
      Matcher::State state(grammar, vocabulary);
      for (int step = 0; step < 30; ++step) {
        const uint32_t budget =
            rng() % 3 == 0 ? UINT32_MAX : state.stacks.min_bytes(state.ready) + 1 + static_cast<uint32_t>(rng() % 6);
        if (step % 5 == 0 || budget != UINT32_MAX) {
          state.fill_mask(fast, budget);
          state.fill_mask_reference(slow, budget);
          ASSERT_EQ(fast, slow) << "step " << step << " budget " << budget;
          ++compared;
        }
        state.fill_mask(fast, budget);
        std::vector<uint32_t> ids = allowed(fast, vocabulary->size());
        std::erase_if(ids, [&](uint32_t id) { return vocabulary->impl().is_end[id]; });
        if (ids.empty()) break;
        ASSERT_TRUE(state.advance_bytes(vocabulary->impl().bytes[ids[rng() % ids.size()]]).ok());
      }
    }
  }
  EXPECT_GT(compared, 40);
}

// Repetitions with a minimum still to reach, under budgets at and below the edge: which tokens
// fit depends on their character counts exactly.
TEST(GrammarMask, ClassRepetitionsUnderTightBudgetsEqualTheReference) {
  auto vocabulary = qwen_vocabulary();
  std::vector<uint32_t> fast((vocabulary->size() + 31) / 32), slow(fast.size());
  const GrammarPtr grammars[] = {compile_gbnf("root ::= \"a\" [a-z ]{24,40} \".\"").value(),
                                 testing::schema_grammar(R"({"type":"string","pattern":"^[a-zA-Z]{16,20}$"})")};
  std::mt19937_64 rng(11);
  for (const GrammarPtr& grammar : grammars) {
    Matcher::State state(grammar, vocabulary);
    for (int step = 0; step < 8; ++step) {
      const uint32_t shortest = state.stacks.min_bytes(state.ready);
      // A budget below the shortest completion keeps only tokens of enough characters.
      for (const uint32_t budget : {shortest / 2, shortest - 3, shortest - 1, shortest + 1}) {
        state.fill_mask(fast, budget);
        state.fill_mask_reference(slow, budget);
        ASSERT_EQ(fast, slow) << "step " << step << " budget " << budget;
      }
      std::vector<uint32_t> ids = allowed(fast, vocabulary->size());
      std::erase_if(ids, [&](uint32_t id) { return vocabulary->impl().is_end[id]; });
      if (ids.empty()) break;
      ASSERT_TRUE(state.advance_bytes(vocabulary->impl().bytes[ids[rng() % ids.size()]]).ok());
    }
  }
}

TEST(GrammarWalks, FreeTextGrammarsEndInTheirLanguage) {
  const std::regex say("say: [^\n]*\n");
  const std::regex lines("([a-zA-Z ,.]+\n)+");
  for (uint64_t seed = 0; seed < 6; ++seed) {
    const Walk a =
        random_walk(compile_gbnf(class_grammars()[0]).value(), seed, static_cast<uint32_t>(40 + seed * 10), 200);
    ASSERT_TRUE(a.ended) << a.text;
    EXPECT_TRUE(std::regex_match(a.text, say)) << a.text;
    size_t chars = 0;
    for (const char c : a.text.substr(5, a.text.size() - 6)) chars += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
    EXPECT_LE(chars, 200u) << a.text;
    const Walk b =
        random_walk(compile_gbnf(class_grammars()[1]).value(), seed, static_cast<uint32_t>(30 + seed * 10), 200);
    ASSERT_TRUE(b.ended) << b.text;
    EXPECT_TRUE(std::regex_match(b.text, lines)) << b.text;
  }
}

TEST(GrammarMask, BudgetAndEndTokensAreExact) {
  auto vocabulary = qwen_vocabulary();
  const GrammarPtr grammar = testing::schema_grammar(R"({"type":"string","minLength":3,"maxLength":3})");
  Matcher matcher(grammar, vocabulary);
  EXPECT_EQ(matcher.min_bytes_to_accept(), 5u);
  std::vector<uint32_t> mask((vocabulary->size() + 31) / 32);
  // With three tokens left, every allowed token leaves at most two bytes to write.
  matcher.fill_mask(mask, 3);
  const std::vector<uint32_t> ids = allowed(mask, vocabulary->size());
  EXPECT_FALSE(ids.empty());
  for (const uint32_t id : ids) {
    Matcher fresh(grammar, vocabulary);
    ASSERT_TRUE(fresh.accept(id).ok());
    EXPECT_LE(fresh.min_bytes_to_accept(), 2u) << vocabulary->impl().bytes[id];
  }
  for (uint32_t id = 0; id < vocabulary->size(); ++id)
    if (vocabulary->impl().bytes[id] == "\"") {
      EXPECT_FALSE((mask[id / 32] >> (id % 32)) & 1);
    }
  ASSERT_TRUE(matcher.accept_bytes("\"ab").ok());
  EXPECT_FALSE(matcher.accepting());
  EXPECT_FALSE(matcher.accept(testing::kImEnd).ok());
  EXPECT_FALSE(matcher.accept_bytes("cd").ok());
  EXPECT_EQ(matcher.min_bytes_to_accept(), 2u);
  ASSERT_TRUE(matcher.accept_bytes("c\"").ok());
  EXPECT_TRUE(matcher.accepting());
  EXPECT_TRUE(matcher.done());
  EXPECT_TRUE(matcher.accept(testing::kImEnd).ok());
  EXPECT_FALSE(matcher.accept(151644).ok());  // <|im_start|>: a control token
}

}  // namespace
}  // namespace kipp::grammar
