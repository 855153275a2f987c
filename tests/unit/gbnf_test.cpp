// SPDX-License-Identifier: MIT
// GBNF (llama.cpp's grammar notation) compiled to byte grammars: the
// notation's pieces, character classes against their code point ranges for
// every kind of UTF-8 sequence, and errors that name the line and column.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/grammar/gbnf.h"
#include "core/util/utf8.h"
#include "tests/unit/grammar_matches.h"

namespace basalt {
namespace {

using test::matches;

std::string utf8(uint32_t cp) {
  std::string s;
  utf8_append(s, cp);
  return s;
}

// A JSON grammar as llama.cpp users write one (not llama.cpp's file).
constexpr const char* kJson = R"(# JSON, blanks bounded
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
    string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::= "[" ws (value ("," ws value)*)? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [0-9]{0,2})? ws
ws     ::= | " " | "\n" [ \t]{0,20}
)";

TEST(Gbnf, JsonGrammarAcceptsJson) {
  const Grammar g = gbnf_grammar(kJson);
  for (const char* ok : {R"({"a": [1, -2.5e3, true, null, {"b": "\u00e9\n"}]})", "{}", "{\n  \"x\": \"caf\xc3\xa9\"\n}",
                         R"({"k":"\"quoted\""})"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {R"({"a": 01})", R"({"a": [1,]})", R"({"a" 1})", "[1]", "{\"a\": \"\x01\"}", R"({"a": tru})"})
    EXPECT_FALSE(matches(g, bad)) << bad;
}

TEST(Gbnf, RepetitionsGroupsAndComments) {
  const Grammar g = gbnf_grammar(
      "root ::= \"<\" (item \",\")* item? \">\" x{2} y{1,} z{0,2} end  # trailing comment\n"
      "item ::= [a-c]+ | \"-\"\n"
      "x ::= \"x\"\ny ::= \"y\"\nz ::= \"z\"\n"
      "end ::=\n  \"!\" |\n  \"?\"\n");
  for (const char* ok : {"<>xxy!", "<a,bb,->xxyyz?", "<abc>xxyzz!", "<a,>xxy?"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"<>xy!", "<>xxx!", "<>xx!", "<>xxyzzz!", "<d>xxy!", "<>xxy", "<a,,>xxy!"}) EXPECT_FALSE(matches(g, bad)) << bad;
}

// A class's UTF-8 byte sequences take exactly its code points, for ranges
// across every encoded length, their complement, and '.'.
TEST(Gbnf, CharacterClassesAreTheirCodePoints) {
  const Grammar g = gbnf_grammar(R"(root ::= [a-z\u00e9-\u0101\u07ff-\u0800\uFFFD\U0001F600-\U0001F64F\U00100000-\U0010FFFF])");
  const Grammar not_g = gbnf_grammar(R"(root ::= [^a-z\u00e9-\u0101\u07ff-\u0800\uFFFD\U0001F600-\U0001F64F\U00100000-\U0010FFFF])");
  const Grammar any = gbnf_grammar("root ::= .");
  auto in_class = [](uint32_t cp) {
    return (cp >= 'a' && cp <= 'z') || (cp >= 0xe9 && cp <= 0x101) || (cp >= 0x7ff && cp <= 0x800) || cp == 0xfffd ||
           (cp >= 0x1f600 && cp <= 0x1f64f) || cp >= 0x100000;
  };
  std::vector<uint32_t> cps = {0, 0x60, 'a', 'z', 0x7b, 0x7f, 0x80, 0xe8, 0xe9, 0x101, 0x102, 0x7fe, 0x7ff, 0x800, 0x801, 0xd7ff,
                               0xe000, 0xfffc, 0xfffd, 0xfffe, 0xffff, 0x10000, 0x1f5ff, 0x1f600, 0x1f64f, 0x1f650, 0xfffff,
                               0x100000, 0x10ffff};
  std::mt19937 rng(1);
  for (int i = 0; i < 3000; ++i) {
    uint32_t cp = std::uniform_int_distribution<uint32_t>(0, 0x10ffff)(rng);
    if (i % 3 == 0) cp &= 0xfff;
    if (cp < 0xd800 || cp > 0xdfff) cps.push_back(cp);
  }
  for (uint32_t cp : cps) {
    EXPECT_EQ(matches(g, utf8(cp)), in_class(cp)) << std::hex << cp;
    EXPECT_EQ(matches(not_g, utf8(cp)), !in_class(cp)) << std::hex << cp;
    EXPECT_TRUE(matches(any, utf8(cp))) << std::hex << cp;
  }
  EXPECT_FALSE(matches(any, "\xed\xa0\x80"));  // a surrogate
  EXPECT_FALSE(matches(any, "\xc0\x80"));      // an overlong NUL
  EXPECT_FALSE(matches(any, "ab"));
}

TEST(Gbnf, ErrorsNameTheLineAndColumn) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"root ::= item\n", "line 1 column 10: the rule 'item' is used but not defined"},
      {"item ::= \"a\"\n", "no rule 'root'"},
      {"root ::= \"a\n", "line 1 column 12: the literal has no closing"},
      {"root ::= \"a\"\nroot ::= \"b\"\n", "line 2 column 1: the rule 'root' is defined twice"},
      {"root ::= [a-\n", "no closing ']'"},
      {"root ::= [z-a]\n", "comes before its start"},
      {"root ::= \"\\q\"\n", "unknown escape"},
      {"root ::= \"\\uD800\"\n", "not a Unicode scalar value"},
      {"root ::= (\"a\"\n", "expected ')'"},
      {"root ::= \"a\" )\n", "expected the end of the rule"},
      {"root = \"a\"\n", "expected '::='"},
      {"root ::= root \"a\"\n", "left-recursive"},
      {"root ::= \"a\"{5000}\n", "repetition count"},
      {"root ::= \"a\"{3,2}\n", "below its minimum"},
      {"root ::= \"\xff\"\n", "not valid UTF-8"},
      {"root ::= @\n", "unexpected '@'"},
  };
  for (const auto& [text, needle] : cases) {
    try {
      gbnf_grammar(text);
      ADD_FAILURE() << "no Error for " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << text << "\n  " << e.what();
    }
  }
  EXPECT_THROW(gbnf_grammar("root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')')), Error);  // nesting
}

// Readings that nest without bound (each 'a' may open another root) stop at
// the matcher's bound with an Error, never a hang; a generation held to such
// a grammar ends ("no token fits") rather than throw on the engine's threads.
TEST(Gbnf, AmbiguousGrammarsStayWithinTheMatchersBounds) {
  const Grammar g = gbnf_grammar("root ::= \"a\" [a-z]* root? [a-z]*\n");
  GrammarMatcher m(g);
  size_t most = 0;
  bool stopped = false;
  for (int i = 0; i < 20000 && !stopped; ++i) {
    try {
      ASSERT_TRUE(m.accept(static_cast<uint8_t>('a')));
      most = std::max(most, m.n_stacks());
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("readings"), std::string::npos) << e.what();
      stopped = true;
    }
  }
  EXPECT_TRUE(stopped);
  EXPECT_LE(most, GrammarMatcher::kMaxStacks);
  EXPECT_GT(most, 100u);
}

}  // namespace
}  // namespace basalt
