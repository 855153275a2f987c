// SPDX-License-Identifier: MIT
// Output held to a grammar (core/grammar): the JSON grammar against
// nlohmann's parser on random texts, JSON Schema grammars on instances and
// non-instances, the vocabulary walk against trying every token alone, and
// generations from random logits that must come out as valid instances.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/grammar/json_schema.h"
#include "core/grammar/token_constraint.h"
#include "core/runtime/generation.h"
#include "core/tokenizer/tokenizer_gguf.h"
#include "tests/unit/byte_vocab.h"
#include "tests/unit/grammar_matches.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

using nlohmann::json;

using test::matches;

// A random JSON value's compact text: no blanks (the grammar bounds them, the
// parser does not), numbers of few digits.
std::string random_json(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> pick(0, depth > 2 ? 4 : 6);
  auto n = [&](int hi) { return std::uniform_int_distribution<int>(0, hi)(rng); };
  switch (pick(rng)) {
    case 0: return std::to_string(n(2000) - 1000) + (n(1) ? "." + std::to_string(n(99)) : "") + (n(3) == 0 ? "e-" + std::to_string(n(30)) : "");
    case 1: return n(1) ? "true" : "null";
    case 2: {
      static const char* kChars[] = {"a", "Z", "0", " ", "\\\"", "\\\\", "\\n", "\\u00e9", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
      std::string s = "\"";
      for (int i = n(5); i > 0; --i) s += kChars[n(10)];
      return s + "\"";
    }
    case 3: return "false";
    case 4: return "\"k\"";
    case 5: {
      std::string s = "[";
      for (int i = n(3); i > 0; --i) s += random_json(rng, depth + 1) + (i > 1 ? "," : "");
      return s + "]";
    }
    default: {
      std::string s = "{";
      for (int i = n(3); i > 0; --i) s += "\"k" + std::to_string(i) + "\":" + random_json(rng, depth + 1) + (i > 1 ? "," : "");
      return s + "}";
    }
  }
}

TEST(Grammar, JsonAcceptsWhatTheJsonParserAccepts) {
  const Grammar g = json_grammar(false);
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\",:.-+eE0123456789tfnrulasx\\";
  int valid = 0, invalid = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = random_json(rng, 0);
    if (i % 2) {  // a mutation: most are no longer JSON
      const size_t at = std::uniform_int_distribution<size_t>(0, text.size() - 1)(rng);
      const char c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
      switch (i % 3) {
        case 0: text[at] = c; break;
        case 1: text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        default: text.erase(at, 1);
      }
    }
    const bool is_json = json::accept(text);
    (is_json ? valid : invalid)++;
    EXPECT_EQ(is_json, matches(g, text)) << text;
  }
  EXPECT_GT(valid, 1000);
  EXPECT_GT(invalid, 500);
}

TEST(Grammar, JsonBlanksAndNumbersAreBounded) {
  const Grammar g = json_grammar(false);
  EXPECT_TRUE(matches(g, "{\n  \"a\": [\n    1,\n    2\n  ]\n}"));
  EXPECT_TRUE(matches(g, " {\"a\" : 1 }"));
  EXPECT_FALSE(matches(g, "{  \"a\": 1}"));   // two spaces
  EXPECT_FALSE(matches(g, "{\n\n\"a\": 1}"));  // two newlines
  EXPECT_FALSE(matches(g, "{\"a\": 1} "));    // nothing after the value
  EXPECT_TRUE(matches(g, "1234567890123456"));
  EXPECT_FALSE(matches(g, "12345678901234567"));
  EXPECT_FALSE(matches(g, "\"\xc0\xaf\""));      // an overlong '/'
  EXPECT_FALSE(matches(g, "\"\xed\xa0\x80\""));  // a surrogate
  EXPECT_FALSE(matches(g, "\"a\nb\""));          // a control character in a string
  const Grammar object = json_grammar(true);
  EXPECT_TRUE(matches(object, "{}"));
  EXPECT_FALSE(matches(object, "[]"));
  EXPECT_FALSE(matches(object, "\"{}\""));
  GrammarMatcher m(object);
  ASSERT_TRUE(m.accept("{\"a\":1"));
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept("}"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.can_continue());
}

// A schema whose readings or nesting would pass the matcher's bounds is
// refused when it is compiled (past them, a generation ends: "no token fits").
// An enum is a trie: thousands of values are one reading after their first byte.
TEST(JsonSchema, BoundsOnReadingsAndNesting) {
  std::string many_optional = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 3000; ++i) many_optional += (i ? ", " : "") + std::string("\"p") + std::to_string(i) + R"(": {"type": "integer"})";
  many_optional += "}}";
  EXPECT_THROW(json_schema_grammar(many_optional), Error);
  std::string optional = R"({"type": "object", "properties": {)";  // as many as allowed, none required
  for (int i = 0; i < 500; ++i) optional += (i ? ", " : "") + std::string("\"p") + std::to_string(i) + R"(": {"type": "integer"})";
  optional += "}}";
  EXPECT_TRUE(matches(json_schema_grammar(optional), R"({"p499": 1})"));
  std::string same = R"({"anyOf": [)";  // the same reading 5000 times is one reading
  for (int i = 0; i < 5000; ++i) same += (i ? ", " : "") + std::string(R"({"type": "string"})");
  same += "]}";
  EXPECT_TRUE(matches(json_schema_grammar(same), R"("x")"));
  nlohmann::json values = nlohmann::json::array();
  for (int i = 0; i < 5000; ++i) values.push_back("value number " + std::to_string(i));
  const Grammar g = json_schema_grammar((nlohmann::json{{"enum", values}}).dump());
  EXPECT_TRUE(matches(g, "\"value number 4321\""));
  EXPECT_TRUE(matches(g, "\"value number 0\""));
  EXPECT_FALSE(matches(g, "\"value number 5000\""));
  EXPECT_FALSE(matches(g, "\"value number \""));
  nlohmann::json too_many = nlohmann::json::array();
  for (int i = 0; i < 10001; ++i) too_many.push_back(i);
  EXPECT_THROW(json_schema_grammar((nlohmann::json{{"enum", too_many}}).dump()), Error);
}

TEST(Grammar, LeftRecursionAndEmptyRulesAreRefused) {
  Grammar g;
  const int32_t r = g.new_rule();
  g.add_alternative(r, {Grammar::ref(r), g.byte('a')});
  g.set_root(r);
  EXPECT_THROW(g.check(), Error);
  Grammar empty;
  empty.set_root(empty.new_rule());
  EXPECT_THROW(GrammarMatcher{empty}, Error);
}

struct SchemaCase {
  const char* schema;
  std::vector<const char*> instances, not_instances;
};

// Text without a pattern, alone and with the pattern after it, on every
// string of up to 7 bytes over the pattern's letters and one other (where a
// pattern's overlaps with itself trip a naive matcher: "aab" in "aaab").
TEST(Grammar, TextWithoutAPatternIsAnyTextThatLacksIt) {
  for (const std::string pattern : {"aab", "abab", "<a>", "a"}) {
    Grammar g;
    const int32_t root = g.new_rule();
    g.add_alternative(root, {g.text_without(pattern)});
    g.set_root(root);
    g.check();
    Grammar tagged;
    const int32_t t = tagged.new_rule();
    Grammar::Sequence seq = {tagged.text_without(pattern)};
    for (const Grammar::Element& e : tagged.literal(pattern)) seq.push_back(e);
    tagged.add_alternative(t, seq);
    tagged.set_root(t);
    tagged.check();
    std::string letters = "x";
    for (char c : pattern)
      if (letters.find(c) == std::string::npos) letters += c;
    int checked = 0;
    std::string text;
    std::function<void()> each = [&] {
      const bool has = text.find(pattern) != std::string::npos;
      EXPECT_EQ(!has, test::matches(g, text)) << pattern << " in '" << text << "'";
      // Tagged: the pattern ends the text, and what comes before it lacks the pattern.
      const size_t before = text.size() >= pattern.size() ? text.size() - pattern.size() : std::string::npos;
      const bool tagged_ok = before != std::string::npos && text.compare(before, pattern.size(), pattern) == 0 &&
                             text.substr(0, before).find(pattern) == std::string::npos;
      EXPECT_EQ(tagged_ok, test::matches(tagged, text)) << pattern << " then itself: '" << text << "'";
      ++checked;
      if (text.size() == 7) return;
      for (char c : letters) {
        text.push_back(c);
        each();
        text.pop_back();
      }
    };
    each();
    EXPECT_GT(checked, 200);
  }
  Grammar g;
  EXPECT_THROW(g.text_without(""), Error);
}

TEST(JsonSchema, InstancesMatchAndOthersDoNot) {
  const std::vector<SchemaCase> cases = {
      {R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]})",
       {R"({"name": "Ada", "age": 36})", R"({"name":"","age":-1})"},
       {R"({"age": 36, "name": "Ada"})", R"({"name": "Ada"})", R"({"name": "Ada", "age": 3.5})", R"({"name": "Ada", "age": 36, "x": 1})"}},
      {R"({"properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"enum": ["x", 2, null]}}, "required": ["b"]})",
       {R"({"b": null})", R"({"a": true, "b": null})", R"({"b": null, "c": "x"})", R"({"a": false, "b": null, "c": 2})"},
       {R"({})", R"({"a": true})", R"({, "b": null})", R"({"b": null,})", R"({"b": null, "c": "y"})"}},
      {R"({"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 3})",
       {"[1]", "[1, 2.5, -3e2]"},
       {"[]", "[1, 2, 3, 4]", "[\"1\"]"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}, {"const": 7}], "items": false})",
       {R"(["a", 7])"},
       {R"(["a"])", R"(["a", 8])", R"(["a", 7, 7])"}},
      {R"({"type": ["string", "null"], "maxLength": 3, "minLength": 1})",
       {R"("abc")", "null", R"("\u00e9")", "\"\xe2\x82\xac\""},
       {R"("")", R"("abcd")", "3"}},
      {R"({"type": "string", "format": "date-time"})",
       {R"("2026-12-07T09:30:00Z")", R"("2026-12-07T09:30:00.25+01:00")"},
       {R"("2026-13-07T09:30:00Z")", R"("2026-12-07 09:30:00Z")"}},
      {R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}}, "$ref": "#/$defs/node"})",
       {R"({"v": 1})", R"({"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3}]})"},
       {R"({"kids": []})", R"({"v": 1, "kids": [{}]})"}},
      {R"({"anyOf": [{"type": "integer"}, {"type": "object", "additionalProperties": {"type": "boolean"}}]})",
       {"12", R"({})", R"({"x": true, "y": false})"},
       {"1.5", R"({"x": 1})"}},
      {"{}", {"1", R"({"any": [null]})"}, {"nul"}},
  };
  for (const SchemaCase& c : cases) {
    const Grammar g = json_schema_grammar(c.schema);
    for (const char* text : c.instances) EXPECT_TRUE(matches(g, text)) << c.schema << "\n  " << text;
    for (const char* text : c.not_instances) EXPECT_FALSE(matches(g, text)) << c.schema << "\n  " << text;
  }
}

TEST(JsonSchema, WhatCannotBeEnforcedIsRefusedByName) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({"type": "string", "pattern": "^a+$"})", "\"pattern\""},
      {R"({"properties": {"n": {"type": "integer", "minimum": 1}}})", "#/properties/n"},
      {R"({"type": "string", "format": "email"})", "email"},
      {R"({"$ref": "#/$defs/missing"})", "does not resolve"},
      {R"({"$ref": "http://example.com/s.json"})", "within the document"},
      {R"({"type": "array", "maxItems": 100000})", "repetition"},
      {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "\"b\""},
      {R"({"type": "thing"})", "unknown type"},
      {"false", "matches nothing"},
      {"{\"type\": ", "not valid JSON"},
  };
  for (const auto& [schema, needle] : cases) {
    try {
      json_schema_grammar(std::string_view(schema));
      ADD_FAILURE() << "no Error for " << schema;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

// The byte vocabulary with a few JSON-ish pieces of several bytes.
Tokenizer json_vocab() {
  return test::byte_vocab({"{", "}", "{\"", "\":", "\",", "\"}", "\u2581\"", "\u2581{", "[", "]", "],", "\u2581[", "true",
                           "false", "null", "\u2581true", "12", "3.5", "-1", "e", "na", "name", "\"name\"", "age", "\u2581\u2581",
                           "\n", "\u2581:", ",\u2581", "\u00e9", "\xe2\x82", "ab", "abc", "\\n", "\\u00", "x\"}"});
}

TEST(TokenConstraint, AllowedIsEveryTokenThatFitsAlone) {
  const Tokenizer tok = json_vocab();
  auto g = std::make_shared<const Grammar>(json_schema_grammar(
      R"({"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}, "age": {"type": "integer"}}, "required": ["name", "age"]})"));
  const std::string text = R"( {"name": "a\u00e9\n", "tags": ["x"], "age": 12})";
  TokenConstraint c(g, tok);
  int checked_states = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    const std::vector<uint8_t>& allowed = c.allowed();
    int n_allowed = 0;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      EXPECT_EQ(c.allows(id), allowed[static_cast<size_t>(id)] != 0) << "after \"" << text.substr(0, i) << "\": token " << id;
      n_allowed += allowed[static_cast<size_t>(id)];
    }
    EXPECT_GT(n_allowed, 0) << text.substr(0, i);
    ++checked_states;
    if (i == text.size()) break;
    const int32_t byte_token = 3 + static_cast<uint8_t>(text[i]);
    ASSERT_TRUE(c.allows(byte_token)) << text.substr(0, i + 1);
    c.accept(byte_token);
  }
  EXPECT_TRUE(c.complete());
  EXPECT_TRUE(c.allows(2));         // the end of generation, where the grammar may end
  EXPECT_FALSE(c.allows(3 + ' '));  // and no byte (Generation ends the request at complete())
  EXPECT_EQ(checked_states, static_cast<int>(text.size()) + 1);
  EXPECT_THROW(c.accept(3 + 'x'), Error);
}

// Random logits, so nearly every draw misses the grammar and is drawn again
// from its tokens: every output must be a whole instance of the schema.
TEST(TokenConstraint, GenerationFromRandomLogitsIsAnInstance) {
  const Tokenizer tok = json_vocab();
  const char* schema = R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 6}, "ok": {"type": "boolean"},
      "n": {"type": "integer"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
      "required": ["name", "ok", "n"]})";
  GenerateOptions opt;
  opt.grammar = std::make_shared<const Grammar>(json_schema_grammar(schema));
  opt.max_tokens = 400;
  opt.sampling = test::untruncated_sampling();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()));
  int complete = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    opt.sampling.seed = seed;
    std::string out;
    Generation gen(tok, opt, {1}, tok.n_vocab(), [&](std::string_view s) { return out += s, true; });
    while (!gen.done()) {
      for (float& l : logits) l = normal(rng);
      gen.step(logits.data(), 1000);
    }
    const std::string& reason = gen.stats().stop_reason;
    ASSERT_TRUE(reason == "grammar" || reason == "eos" || reason == "length") << reason;
    if (reason == "length") continue;  // integers may run to 16 digits, strings' escapes to 6 bytes a character
    ++complete;
    const json j = json::parse(out);  // throws on anything but JSON
    ASSERT_TRUE(j.is_object()) << out;
    EXPECT_TRUE(j.at("name").is_string() && j.at("ok").is_boolean() && j.at("n").is_number_integer()) << out;
    EXPECT_LE(j.size(), 4u) << out;
    if (j.contains("tags")) {
      for (const json& t : j.at("tags")) EXPECT_TRUE(t == "a" || t == "b") << out;
    }
  }
  EXPECT_GT(complete, 30);
}

// The walk against every token alone on the packaged models' vocabularies
// (SmolLM2's byte-level BPE, 49k tokens; Gemma 3's SentencePiece, 262k),
// inside a string (nearly every token fits) and between members (few do).
TEST(GrammarModel, AllowedIsEveryTokenThatFitsOnRealVocabularies) {
  auto g = std::make_shared<const Grammar>(json_schema_grammar(
      R"({"type": "object", "properties": {"title": {"type": "string"}, "year": {"type": "integer"}}, "required": ["title", "year"]})"));
  for (const std::string& path : {test::smollm2_path(), test::gemma3_path()}) {
    const Tokenizer tok(load_tokenizer_data(GgufFile::open(path)));
    for (const std::string& prefix : {std::string("{\"title\": \"Dune"), std::string("{\"title\": \"Dune\""), std::string("{\"title\": \"\u00e9\", \"year\": 19")}) {
      TokenConstraint c(g, tok);
      std::vector<int32_t> ids = tok.encode(prefix, false, false);
      for (int32_t id : ids) {
        ASSERT_TRUE(c.allows(id)) << path << ": " << prefix << " token " << id;
        c.accept(id);
      }
      const auto t0 = std::chrono::steady_clock::now();
      const std::vector<uint8_t>& allowed = c.allowed();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      int n_allowed = 0;
      for (int32_t id = 0; id < tok.n_vocab(); ++id) {
        ASSERT_EQ(c.allows(id), allowed[static_cast<size_t>(id)] != 0) << path << " after " << prefix << ": token " << id;
        n_allowed += allowed[static_cast<size_t>(id)];
      }
      EXPECT_GT(n_allowed, 0);
      std::printf("%s after %s: %d of %d tokens fit, found in %.1f ms\n", path.c_str(), prefix.c_str(), n_allowed, tok.n_vocab(), ms);
    }
  }
}

}  // namespace
}  // namespace basalt
