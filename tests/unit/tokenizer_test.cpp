// SPDX-License-Identifier: MIT
// Tokenizer: token ids equal llama.cpp's for every case in
// tests/data/tokenizer/*.json (made by tests/python/make_tokenizer_refs.py),
// decoding gives the text back, streaming never splits a character, and bad
// input or a bad vocabulary is an Error, not a crash.
#include <gtest/gtest.h>

#include <algorithm>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/tokenizer_gguf.h"
#include "core/util/utf8.h"
#include "tests/unit/gguf_builder.h"
#include "tests/unit/show_ids.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

// A byte-level BPE vocabulary as a raw-UTF-8 one (Gemma 4's kind), exactly as
// tests/python/make_tokenizer_refs.py's utf8_vocab makes it for llama.cpp:
// each normal token's bytes as text with spaces as U+2581 (no whole UTF-8
// text, a NUL, or a repeat: unused), 256 <0xXX> byte tokens appended, and the merges
// whose two pieces convert.
TokenizerData utf8_vocab(TokenizerData d) {
  uint32_t char_of_byte[256], n = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    char_of_byte[b] = printable ? b : 256 + n++;
  }
  std::map<uint32_t, char> byte_of_char;
  for (uint32_t b = 0; b < 256; ++b) byte_of_char[char_of_byte[b]] = static_cast<char>(b);
  auto raw = [&](const std::string& piece, std::string& out) {
    out.clear();
    for (size_t pos = 0; pos < piece.size();) {  // byte-level characters are all below U+0800
      auto c0 = static_cast<unsigned char>(piece[pos]);
      uint32_t cp = c0;
      if (c0 >= 0x80 && (c0 & 0xE0) == 0xC0 && pos + 1 < piece.size())
        cp = (c0 & 0x1Fu) << 6 | (static_cast<unsigned char>(piece[pos + 1]) & 0x3Fu);
      else if (c0 >= 0x80)
        return false;
      auto it = byte_of_char.find(cp);
      if (it == byte_of_char.end() || it->second == '\0') return false;  // a GGUF string cannot hold NUL for llama.cpp
      out += it->second == ' ' ? std::string("\xe2\x96\x81") : std::string(1, it->second);
      pos += c0 < 0x80 ? 1 : 2;
    }
    return is_valid_utf8(out);  // whole UTF-8 text
  };
  std::set<std::string> seen;
  std::string text;
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    int32_t& type = d.token_types[i];
    bool converts = type != 1 || raw(d.tokens[i], text);
    if (type == 1 && converts) d.tokens[i] = text;
    if (!converts || !seen.insert(d.tokens[i]).second) {
      d.tokens[i] = "<unused_utf8_" + std::to_string(i) + ">";
      type = 5;
      seen.insert(d.tokens[i]);
    }
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    d.tokens.push_back(name);
    d.token_types.push_back(6);
  }
  std::vector<std::string> merges;
  std::string left, right;
  for (const std::string& m : d.merges) {
    size_t cut = m.find(' ', 1);
    if (raw(m.substr(0, cut), left) && raw(m.substr(cut + 1), right)) merges.push_back(left + " " + right);
  }
  d.merges = std::move(merges);
  return d;
}

// Vocabularies are read once per test binary.
const TokenizerData& base_data(const std::string& base) {
  static std::map<std::string, TokenizerData> cache;
  auto it = cache.find(base);
  if (it != cache.end()) return it->second;
  if (base == "smollm2_utf8") return cache.emplace(base, utf8_vocab(base_data("smollm2"))).first->second;
  std::string path = base == "gemma3" ? test::gemma3_path() : test::smollm2_path();
  if (path.empty() || !std::filesystem::exists(path)) throw Error("no model file for vocabulary " + base);
  return cache.emplace(base, load_tokenizer_data(GgufFile::open(path))).first->second;
}

const Tokenizer& smollm2() {
  static Tokenizer tok(base_data("smollm2"));
  return tok;
}
const Tokenizer& gemma3() {
  static Tokenizer tok(base_data("gemma3"));
  return tok;
}

struct RefCase {
  std::string text;
  std::vector<int32_t> ids;
  bool add_special, parse_special;
};
struct RefFile {
  std::string base;
  nlohmann::json overrides;
  std::vector<RefCase> cases;
};

RefFile read_refs(const std::string& name) {
  std::ifstream in(test::data_path("tokenizer/" + name + ".json"));
  if (!in) throw Error("cannot open tests/data/tokenizer/" + name + ".json");
  nlohmann::json j = nlohmann::json::parse(in);
  RefFile r{j.at("base"), j.at("overrides"), {}};
  for (const auto& c : j.at("cases"))
    r.cases.push_back({c.at("text"), c.at("ids").get<std::vector<int32_t>>(), c.at("add_special"), c.at("parse_special")});
  return r;
}

// The base vocabulary with the file's overrides (the same as the GGUF
// metadata overrides the reference ids were made with).
TokenizerData ref_data(const RefFile& r) {
  TokenizerData d = base_data(r.base);
  if (r.overrides.contains("pre")) d.pre = r.overrides["pre"];
  if (r.overrides.contains("add_space_prefix")) d.add_space_prefix = r.overrides["add_space_prefix"];
  if (r.overrides.contains("add_bos")) d.add_bos = r.overrides["add_bos"];
  return d;
}

class TokenizerRefTest : public testing::TestWithParam<std::string> {};

TEST_P(TokenizerRefTest, IdsMatchLlamaCpp) {
  RefFile refs = read_refs(GetParam());
  ASSERT_GT(refs.cases.size(), 100u);
  Tokenizer tok(ref_data(refs));
  for (const RefCase& c : refs.cases) {
    std::vector<int32_t> got = tok.encode(c.text, c.add_special, c.parse_special);
    EXPECT_EQ(test::show_ids(got), test::show_ids(c.ids)) << "text " << nlohmann::json(c.text).dump() << " add_special " << c.add_special
                                      << " parse_special " << c.parse_special;
  }
}

TEST_P(TokenizerRefTest, DecodeGivesTextBack) {
  RefFile refs = read_refs(GetParam());
  TokenizerData d = ref_data(refs);
  const bool spm = d.model == "llama";
  const bool space_prefix = spm && d.add_space_prefix;
  const bool space_marks = spm || refs.base == "smollm2_utf8";  // U+2581 in the text reads back as a space
  const bool drops_spaces = d.pre == "whitespace";
  Tokenizer tok(std::move(d));
  int checked = 0;
  for (const RefCase& c : refs.cases) {
    if (c.parse_special) continue;
    std::vector<int32_t> ids = tok.encode(c.text, c.add_special, false);
    // SentencePiece with a space prefix puts one after every user-defined
    // token too (Gemma's runs of spaces, tabs and newlines), as llama.cpp does.
    bool prefix_inside = false;
    for (size_t i = 1; i < ids.size(); ++i)
      prefix_inside |= space_prefix && tok.type(ids[i - 1]) == TokenType::user_defined;
    // SentencePiece cannot tell U+2581 in the text from a space.
    if (prefix_inside || (space_marks && c.text.find("\xe2\x96\x81") != std::string::npos)) continue;
    std::string expected = c.text;
    if (drops_spaces) {  // the "whitespace" tokenizer drops it: check ASCII texts without theirs
      if (std::any_of(expected.begin(), expected.end(), [](char ch) { return static_cast<unsigned char>(ch) >= 0x80; }))
        continue;
      std::erase_if(expected, [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); });
    }
    EXPECT_EQ(tok.decode(ids), expected) << "ids " << test::show_ids(ids);
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

// Every reference file: SmolLM2 and Gemma 3, and SmolLM2's vocabulary under
// each other pre-tokenizer (smollm2_pre_*: those that run as PCRE2 regexes).
std::vector<std::string> reference_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(test::data_path("tokenizer")))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}
INSTANTIATE_TEST_SUITE_P(Vocabularies, TokenizerRefTest, testing::ValuesIn(reference_names()),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });

// Feeds ids one at a time; every piece must be valid UTF-8.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, int* pieces = nullptr) {
  StreamDecoder dec(tok);
  std::string all;
  for (int32_t id : ids) {
    std::string piece = dec.feed(id);
    EXPECT_TRUE(is_valid_utf8(piece)) << "piece after id " << id;
    all += piece;
    if (pieces && !piece.empty()) ++*pieces;
  }
  std::string rest = dec.flush();
  EXPECT_TRUE(is_valid_utf8(rest));
  return all + rest;
}

TEST(Tokenizer, StreamDecoderKeepsCharactersWhole) {
  const std::string texts[] = {
      "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x81 Hello",  // 你好，世界！
      "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 family \xf0\x9f\x8f\xb3\xef\xb8\x8f\xe2\x80\x8d\xf0\x9f\x8c\x88",
      "\xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf \xf0\x9f\x98\x80\xf0\x9f\x98\x82 \xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7",
      "\xf0\x90\x8d\x88\xf0\x9d\x84\x9e\xf0\xaa\x9a\xb2 astral",
  };
  for (const Tokenizer* tok : {&smollm2(), &gemma3()}) {
    for (const std::string& text : texts) {
      std::vector<int32_t> ids = tok->encode(text, false, false);
      int pieces = 0;
      EXPECT_EQ(stream(*tok, ids, &pieces), text);
      EXPECT_EQ(tok->decode(ids), text);
    }
  }
  // A byte-level BPE token can end inside a character: 👨 alone takes several.
  std::vector<int32_t> ids = smollm2().encode("\xf0\x9f\x91\xa8", false, false);
  EXPECT_GT(ids.size(), 1u);
  StreamDecoder dec(smollm2());
  for (size_t i = 0; i + 1 < ids.size(); ++i) EXPECT_EQ(dec.feed(ids[i]), "");
  EXPECT_EQ(dec.feed(ids.back()), "\xf0\x9f\x91\xa8");
}

TEST(Tokenizer, StreamDecoderFlushReplacesBrokenBytes) {
  const Tokenizer& tok = gemma3();  // has a byte token for every byte
  std::vector<int32_t> ids = tok.encode("a\xe4\xb8", false, false);  // 中 cut short
  StreamDecoder dec(tok);
  std::string out;
  for (int32_t id : ids) out += dec.feed(id);
  EXPECT_EQ(out, "a");
  EXPECT_EQ(dec.flush(), "\xef\xbf\xbd");
  EXPECT_EQ(dec.flush(), "");

  StreamDecoder dec2(tok);
  out.clear();
  for (int32_t id : tok.encode("x\xff\xfe y", false, false)) out += dec2.feed(id);
  out += dec2.flush();
  EXPECT_EQ(out, "x\xef\xbf\xbd\xef\xbf\xbd y");
}

TEST(Tokenizer, InvalidUtf8IsEncodedAsBytes) {
  const std::string bad[] = {
      std::string("\xff"), std::string("abc\xc3("), std::string("\xe4\xb8"), std::string("\xed\xa0\x80 surrogate"),
      std::string("\xf0\x9f\x98 cut emoji"), std::string("\xc0\xaf overlong"), std::string("\x80\x80\x80"),
      std::string("ok \xf4\x90\x80\x80 too big"), std::string("mid\xe2\x82word\xfe\xff"), std::string("\0nul\0", 5),
  };
  // Gemma has <0x00>..<0xFF>: everything comes back.
  for (const std::string& s : bad) {
    std::vector<int32_t> ids = gemma3().encode(s, false, false);
    EXPECT_EQ(gemma3().decode(ids), s) << nlohmann::json::binary({s.begin(), s.end()}).dump();
    stream(gemma3(), ids);
  }
  // SmolLM2 lacks tokens for a few bytes (0xC0, 0xC1, 0xF5..0xFF, ...): those
  // are dropped, as llama.cpp does; the rest comes back.
  for (const std::string& s : bad) {
    std::vector<int32_t> ids = smollm2().encode(s, false, false);
    std::string back = smollm2().decode(ids);
    bool droppable = s.find_first_of(std::string("\xc0\xc1\xf5\xf6\xf7\xf8\xf9\xfa\xfb\xfc\xfd\xfe\xff", 13)) !=
                     std::string::npos;
    if (!droppable) {
      EXPECT_EQ(back, s) << nlohmann::json::binary({s.begin(), s.end()}).dump();
    }
    stream(smollm2(), ids);
  }
  // Nothing else goes wrong on random bytes.
  uint32_t x = 12345;
  for (int n = 0; n < 200; ++n) {
    std::string s;
    for (int i = 0; i < n; ++i) {
      x = x * 1664525u + 1013904223u;
      s += static_cast<char>(x >> 24);
    }
    std::vector<int32_t> g = gemma3().encode(s, true, true);
    EXPECT_EQ(gemma3().decode(std::vector<int32_t>(g.begin() + 1, g.end())), s);
    smollm2().encode(s, true, true);
  }
}

TEST(Tokenizer, SpecialTokens) {
  const Tokenizer& tok = smollm2();
  int32_t im_start = tok.find("<|im_start|>"), im_end = tok.find("<|im_end|>");
  ASSERT_EQ(im_start, 1);
  ASSERT_EQ(im_end, 2);
  std::vector<int32_t> ids = tok.encode("<|im_start|>user", false, true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], im_start);
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + 1, ids.end()), tok.encode("user", false, false));
  // Without parse_special the same text is plain text.
  ids = tok.encode("<|im_start|>user", false, false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), im_start), 0);
  EXPECT_EQ(tok.decode(ids), "<|im_start|>user");

  EXPECT_EQ(tok.type(im_start), TokenType::control);
  EXPECT_EQ(tok.token_to_piece(im_start), "");
  EXPECT_EQ(tok.token_to_piece(im_start, true), "<|im_start|>");
  EXPECT_EQ(tok.decode(tok.encode("<|im_start|>hi<|im_end|>", false, true), true), "<|im_start|>hi<|im_end|>");

  EXPECT_TRUE(tok.is_end_of_generation(im_end));
  EXPECT_TRUE(tok.is_end_of_generation(tok.eos_id()));
  EXPECT_TRUE(tok.is_end_of_generation(tok.find("<|endoftext|>")));
  EXPECT_FALSE(tok.is_end_of_generation(im_start));
  EXPECT_FALSE(tok.is_end_of_generation(tok.find("Hello")));
  EXPECT_FALSE(tok.is_end_of_generation(-1));
  EXPECT_FALSE(tok.add_bos());
  EXPECT_EQ(tok.find("no such token \x01"), -1);

  const Tokenizer& g = gemma3();
  EXPECT_TRUE(g.add_bos());
  EXPECT_EQ(g.encode("hi", true, false).front(), g.bos_id());
  EXPECT_TRUE(g.is_end_of_generation(g.find("<end_of_turn>")));
  EXPECT_TRUE(g.is_end_of_generation(g.eos_id()));
  EXPECT_FALSE(g.is_end_of_generation(g.find("<start_of_turn>")));
  EXPECT_EQ(g.token_to_piece(g.find("<0x0A>")), "\n");
  EXPECT_EQ(g.type(g.find("<0x0A>")), TokenType::byte);
  EXPECT_EQ(g.token_to_piece(g.find("\xe2\x96\x81the")), " the");
  EXPECT_EQ(g.decode(g.encode("<start_of_turn>user\nHi<end_of_turn>", true, true), true),
            "<bos><start_of_turn>user\nHi<end_of_turn>");
  EXPECT_THROW(g.token_to_piece(g.n_vocab()), Error);
  EXPECT_THROW(g.token_to_piece(-1), Error);
}

TokenizerData tiny_bpe() {
  TokenizerData d;
  d.model = "gpt2";
  d.pre = "gpt2";
  d.tokens = {"a", "b", "ab", "\xc4\xa0", "<|end|>"};
  d.token_types = {1, 1, 1, 1, 3};
  d.merges = {"a b"};
  d.eos_id = 4;
  return d;
}

TEST(Tokenizer, BadVocabularyIsAnError) {
  EXPECT_NO_THROW(Tokenizer{tiny_bpe()});
  Tokenizer tiny(tiny_bpe());
  EXPECT_EQ(tiny.encode("ab ab", false, false), (std::vector<int32_t>{2, 3, 2}));

  auto expect_error = [](TokenizerData d, const std::string& needle) {
    try {
      Tokenizer t(std::move(d));
      ADD_FAILURE() << "no Error; expected one mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  TokenizerData d = tiny_bpe();
  d.model = "wordpiece-9000";
  expect_error(d, "wordpiece-9000");
  d = tiny_bpe();
  d.pre = "no-such-pre";
  expect_error(d, "no-such-pre");
  d = tiny_bpe();
  d.merges.clear();
  expect_error(d, "merges");
  d = tiny_bpe();
  d.merges = {"ab"};
  expect_error(d, "merges");
  d = tiny_bpe();
  d.tokens.clear();
  d.token_types.clear();
  expect_error(d, "no tokens");
  d = tiny_bpe();
  d.eos_id = 99;
  expect_error(d, "eos");
  d = tiny_bpe();
  d.add_bos = true;
  expect_error(d, "BOS");
  d = tiny_bpe();
  d.tokens[1] = "a";
  expect_error(d, "repeats");
  d = tiny_bpe();
  d.scores = {0.0f};
  expect_error(d, "scores");
  d = tiny_bpe();
  d.tokens.resize(Tokenizer::kMaxTokens + 1);
  d.token_types.resize(d.tokens.size());
  expect_error(d, "4194305 tokens, more than the 4194304 basalt reads");

  // The GGUF loader names an unknown model too.
  TokenizerData gd = base_data("smollm2");
  EXPECT_EQ(gd.model, "gpt2");
  EXPECT_EQ(gd.pre, "smollm");
  EXPECT_EQ(gd.bos_id, 1);
  EXPECT_EQ(gd.eos_id, 2);
  EXPECT_FALSE(gd.add_bos);
}

TEST(Tokenizer, GgufDefaultsFollowLlamaCpp) {
  auto load = [](test::GgufBuilder& b) { return load_tokenizer_data(GgufFile::from_memory(b.bytes(), "vocab.gguf")); };
  const std::vector<std::string> spm_tokens = {"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a", "a", "<0x61>"};

  // SentencePiece without the optional keys: BOS 1, EOS 2, UNK 0, BOS and space prefix added.
  test::GgufBuilder b;
  b.kv_str("tokenizer.ggml.model", "llama").kv_strs("tokenizer.ggml.tokens", spm_tokens);
  b.kv_f32s("tokenizer.ggml.scores", {0, 0, 0, -1, -2, 0});
  TokenizerData d = load(b);
  EXPECT_EQ(d.bos_id, 1);
  EXPECT_EQ(d.eos_id, 2);
  EXPECT_EQ(d.unk_id, 0);
  EXPECT_EQ(d.eot_id, -1);
  EXPECT_TRUE(d.add_bos);
  EXPECT_FALSE(d.add_eos);
  EXPECT_TRUE(d.add_space_prefix);
  Tokenizer spm(d);
  EXPECT_EQ(spm.encode("a", true, false), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(spm.decode({3}), "a");  // no token types: <s> would be a normal token here
  EXPECT_TRUE(spm.is_end_of_generation(2));

  // Keys override the defaults; an id outside the vocabulary is ignored.
  test::GgufBuilder b2;
  b2.kv_str("tokenizer.ggml.model", "llama").kv_strs("tokenizer.ggml.tokens", spm_tokens);
  b2.kv_bool("tokenizer.ggml.add_bos_token", false).kv_bool("tokenizer.ggml.add_space_prefix", false);
  b2.kv_bool("tokenizer.ggml.add_eos_token", true).kv_u32("tokenizer.ggml.eos_token_id", 1);
  b2.kv_u32("tokenizer.ggml.bos_token_id", 999).kv_u32("tokenizer.ggml.eot_token_id", 4);
  d = load(b2);
  EXPECT_EQ(d.bos_id, 1);
  EXPECT_EQ(d.eos_id, 1);
  EXPECT_EQ(d.eot_id, 4);
  EXPECT_FALSE(d.add_bos);
  EXPECT_TRUE(d.add_eos);
  EXPECT_FALSE(d.add_space_prefix);
  EXPECT_EQ(Tokenizer(d).encode("a", true, false), (std::vector<int32_t>{4, 1}));

  // Byte-level BPE: no BOS unless the pre-tokenizer is Llama 3's; no pre means "default".
  auto bpe = [](const std::string& pre) {
    test::GgufBuilder g;
    g.kv_str("tokenizer.ggml.model", "gpt2").kv_strs("tokenizer.ggml.tokens", {"a", "b", "ab"});
    g.kv_strs("tokenizer.ggml.merges", {"a b"}).kv_u32("tokenizer.ggml.bos_token_id", 0);
    if (!pre.empty()) g.kv_str("tokenizer.ggml.pre", pre);
    return g;
  };
  auto g = bpe("");
  d = load(g);
  EXPECT_EQ(d.pre, "default");
  EXPECT_FALSE(d.add_bos);
  EXPECT_EQ(d.eos_id, -1);  // the default 11 is past this vocabulary
  g = bpe("llama-bpe");
  EXPECT_TRUE(load(g).add_bos);
  g = bpe("qwen2");
  EXPECT_FALSE(load(g).add_bos);
  // tokenizer.ggml.model "gemma4" and "whitespace" are BPE with that
  // pre-tokenizer, whatever tokenizer.ggml.pre says; Gemma 4 always gets BOS.
  for (std::string model : {"gemma4", "whitespace"}) {
    test::GgufBuilder m;
    m.kv_str("tokenizer.ggml.model", model).kv_str("tokenizer.ggml.pre", "qwen2");
    m.kv_strs("tokenizer.ggml.tokens", {"a", "b", "ab"}).kv_strs("tokenizer.ggml.merges", {"a b"});
    m.kv_u32("tokenizer.ggml.bos_token_id", 0).kv_bool("tokenizer.ggml.add_bos_token", false);
    d = load(m);
    EXPECT_EQ(d.model, "gpt2");
    EXPECT_EQ(d.pre, model);
    EXPECT_EQ(Tokenizer(d).encode("ab ab", true, false),
              model == "gemma4" ? (std::vector<int32_t>{0, 2, 2}) : (std::vector<int32_t>{2, 2}));
    // A lowercasing normalizer is not silently ignored.
    m.kv_bool("tokenizer.ggml.normalizer.lowercase", true);
    EXPECT_THROW(load(m), Error);
  }

  // Unknown names are errors that name them.
  g = bpe("pre-from-the-future");
  try {
    load(g);
    ADD_FAILURE() << "no Error for an unknown pre-tokenizer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pre-from-the-future"), std::string::npos) << e.what();
  }
  test::GgufBuilder b3;
  b3.kv_str("tokenizer.ggml.model", "rwkv-world").kv_strs("tokenizer.ggml.tokens", {"a"});
  try {
    load(b3);
    ADD_FAILURE() << "no Error for an unknown tokenizer model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rwkv-world"), std::string::npos) << e.what();
  }
  test::GgufBuilder b4;
  b4.kv_str("general.architecture", "llama");
  EXPECT_THROW(load(b4), Error);
}

TEST(Tokenizer, EncodeSpeed) {
  const std::string paragraph =
      "The history of natural language processing generally started in the 1950s, although work can be found from "
      "earlier periods. In 1950, Alan Turing published an article titled \"Computing Machinery and Intelligence\" "
      "which proposed what is now called the Turing test as a criterion of intelligence. It's been a long road since "
      "then: rule-based systems, statistical models, and now large neural networks trained on trillions of tokens.\n\n";
  std::string text;
  while (text.size() < (1u << 20)) text += paragraph;
  for (const Tokenizer* tok : {&smollm2(), &gemma3()}) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int32_t> ids = tok->encode(text, false, false);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("encode: %zu bytes -> %zu tokens in %.3f s = %.0f tokens/s (%s)\n", text.size(), ids.size(), s,
                ids.size() / s, tok == &smollm2() ? "SmolLM2 BPE" : "Gemma 3 SentencePiece");
    EXPECT_EQ(tok->decode(ids), text);
  }
}

}  // namespace
}  // namespace basalt
