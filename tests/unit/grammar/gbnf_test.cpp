// The GBNF front end: syntax llama.cpp's documentation describes, and errors with positions.
#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "unit/grammar/grammar_test_support.h"

namespace kipp::grammar {
namespace {

using testing::matches;

GrammarPtr gbnf(const std::string& text) {
  auto grammar = compile_gbnf(text);
  EXPECT_TRUE(grammar.ok()) << text << ": " << (grammar.ok() ? "" : grammar.message());
  return grammar.ok() ? *grammar : any_json_object();
}

std::string gbnf_error(const std::string& text) {
  auto grammar = compile_gbnf(text);
  return grammar.ok() ? "" : grammar.message();
}

TEST(Gbnf, RulesAlternativesAndRepetition) {
  const GrammarPtr g = gbnf(R"(# a comment
root ::= greeting " " name ("!" | "?")?   # trailing comment
greeting ::= "hi" | "hello"
name ::= [A-Z] [a-z]*
)");
  EXPECT_TRUE(matches(g, "hi Ann"));
  EXPECT_TRUE(matches(g, "hello Bo!"));
  EXPECT_TRUE(matches(g, "hi X?"));
  EXPECT_FALSE(matches(g, "hi ann"));
  EXPECT_FALSE(matches(g, "hey Ann"));
  const GrammarPtr counts = gbnf("root ::= \"a\"{2} \"b\"{1,3} \"c\"{2,} \"d\"{,1}\n");
  EXPECT_TRUE(matches(counts, "aabcc"));
  EXPECT_TRUE(matches(counts, "aabbbccccd"));
  EXPECT_FALSE(matches(counts, "abcc"));
  EXPECT_FALSE(matches(counts, "aabbbbcc"));
  EXPECT_FALSE(matches(counts, "aabc"));
  const GrammarPtr multi = gbnf("root ::= (\n  \"x\" |\n  \"y\"\n)+\n  | \"z\"\n");
  EXPECT_TRUE(matches(multi, "xyx"));
  EXPECT_TRUE(matches(multi, "z"));
}

TEST(Gbnf, LiteralsClassesAndEscapes) {
  const GrammarPtr g = gbnf(R"(root ::= "\"q\"\n\t\\" [^a-c\]] . "\x41\u00e9\U0001F600" [\u00e0-\u00ff])");
  EXPECT_TRUE(matches(g,
                      "\"q\"\n\t\\d\xE2\x82\xAC"
                      "A\xC3\xA9\xF0\x9F\x98\x80\xC3\xA0"));
  EXPECT_FALSE(matches(g,
                       "\"q\"\n\t\\b\xE2\x82\xAC"
                       "A\xC3\xA9\xF0\x9F\x98\x80\xC3\xA0"));
  EXPECT_FALSE(matches(g,
                       "\"q\"\n\t\\]x"
                       "A\xC3\xA9\xF0\x9F\x98\x80\xC3\xA0"));
  EXPECT_FALSE(matches(g, "\"q\"\n\t\\dxA\xC3\xA9\xF0\x9F\x98\x80\xC3\x9F"));
  const GrammarPtr recursive = gbnf("root ::= \"(\" root \")\" | \"\"\n");
  EXPECT_TRUE(matches(recursive, "((()))"));
  EXPECT_FALSE(matches(recursive, "(()"));
}

TEST(Gbnf, ErrorsNameLineAndColumn) {
  EXPECT_EQ(gbnf_error("root ::= \"a\"\nx ::= [a-\n"), "GBNF line 2, column 7: unterminated character class");
  EXPECT_EQ(gbnf_error("root ::= foo\n"), "GBNF line 1, column 10: undefined rule 'foo'");
  EXPECT_EQ(gbnf_error("root ::= \"a\n"), "GBNF line 1, column 12: a literal cannot span lines");
  EXPECT_EQ(gbnf_error("root = \"a\"\n"), "GBNF line 1, column 6: expected '::=' after 'root'");
  EXPECT_EQ(gbnf_error("root ::= \"a\" }\n"), "GBNF line 1, column 14: unexpected character '}'");
  EXPECT_EQ(gbnf_error("root ::= (\"a\"\n"), "GBNF line 1, column 10: unclosed '('");
  EXPECT_EQ(gbnf_error("a ::= \"x\"\n"), "GBNF: the grammar has no rule 'root'");
  EXPECT_EQ(gbnf_error("root ::= \"\\q\"\n"), "GBNF line 1, column 11: unknown escape '\\q'");
  EXPECT_NE(gbnf_error("root ::= root \"a\" | \"b\"\n").find("left-recursive"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= (\"a\"?)*\n").find("may match nothing"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= \"x\" b*\nb ::= \"y\"{0,3}\n").find("may match nothing"), std::string::npos);
  EXPECT_NE(gbnf_error("root ::= \"a\"\nroot ::= \"b\"\n").find("defined twice"), std::string::npos);
}

// GBNF repetitions allow spaces and comments between their parts, and `{,n}` and `{,}` from 0.
TEST(Gbnf, RepetitionBounds) {
  const GrammarPtr spaced = gbnf("root ::= \"a\"{ 1 , 2 } \"b\"{,} \"c\"{ ,1 }\n");
  EXPECT_TRUE(matches(spaced, "a"));
  EXPECT_TRUE(matches(spaced, "aabbbc"));
  EXPECT_FALSE(matches(spaced, "aaa"));
  EXPECT_FALSE(matches(spaced, "acc"));
  EXPECT_EQ(gbnf_error("root ::= \"a\"{}\n"), "GBNF line 1, column 14: expected a number in '{}'");
  EXPECT_EQ(gbnf_error("root ::= \"a\"{ }\n"), "GBNF line 1, column 15: expected a number in '{}'");
  EXPECT_EQ(gbnf_error("root ::= \"a\"{2 x}\n"), "GBNF line 1, column 16: expected '}'");
  EXPECT_EQ(gbnf_error("root ::= \"a\"{1 # c\n}\n"), "GBNF line 1, column 19: expected '}'");
  EXPECT_EQ(gbnf_error("root ::= \"a\"{2"), "GBNF line 1, column 15: expected '}'");
  EXPECT_EQ(gbnf_error("root ::= \"a\"{2,1}\n"), "GBNF line 1, column 18: a repetition {m,n} with n below m");
}

}  // namespace
}  // namespace kipp::grammar
