// SPDX-License-Identifier: MIT
// tokenizer.json: the SmolLM2 vocabulary written as an HF folder with each
// pre-tokenizer the reference files cover (tests/python/make_hf_folder.py),
// and the Gemma 3 SentencePiece vocabulary in the byte-fallback BPE form
// transformers converts it to, must give llama.cpp's ids for the same strings,
// as the GGUF path does; the newer Metaspace form prefixes only the text's
// start, as HF does; and malformed or unsupported tokenizer.json files are
// clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/tokenizer/tokenizer_gguf.h"
#include "core/tokenizer/tokenizer_hf.h"
#include "tests/unit/show_ids.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

class TokenizerHfRefTest : public testing::TestWithParam<std::string> {};

// A parameter is a reference file's name, and "+split" for Gemma's Split(" ")
// pre-tokenizer (make_hf_folder.py --split-spaces).
TEST_P(TokenizerHfRefTest, IdsMatchLlamaCpp) {
  const std::string param = GetParam(), ref = param.substr(0, param.find('+'));
  std::ifstream in(test::data_path("tokenizer/" + ref + ".json"));
  ASSERT_TRUE(in) << "tests/data/tokenizer/" << ref << ".json";
  const nlohmann::json refs = nlohmann::json::parse(in);
  const nlohmann::json& over = refs["overrides"];
  const bool gemma = refs.value("base", "") == "gemma3";
  std::string options = " --pre " + over.value("pre", std::string("smollm"));
  if (gemma) {  // the reference's overrides as tokenizer.json settings (a prefix: the normalizer form, as llama.cpp)
    options.clear();
    if (over.contains("add_space_prefix"))
      options += std::string(" --space-prefix ") + (over["add_space_prefix"].get<bool>() ? "true" : "false");
    if (over.contains("add_bos")) options += std::string(" --add-bos ") + (over["add_bos"].get<bool>() ? "true" : "false");
    if (param.ends_with("+split")) options += " --split-spaces";
  }
  const std::string dir = test::temp_dir("tokenizer_hf_" + ref + (param.ends_with("+split") ? "_split" : ""));
  ASSERT_EQ(test::run_command(std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/make_hf_folder.py " +
                              (gemma ? test::gemma3_path() : test::smollm2_path()) + " " + dir + " --vocab-only" + options),
            0);
  HfTokenizer hf = load_tokenizer_hf(dir);
  EXPECT_EQ(hf.chat_template.empty(), gemma);  // the Gemma 3 file has none
  Tokenizer tok(std::move(hf.data));
  EXPECT_EQ(tok.n_vocab(), gemma ? 262144 : 49152);
  EXPECT_EQ(tok.token_to_piece(tok.eos_id(), true), gemma ? "<eos>" : "<|im_end|>");
  int n = 0;
  for (const auto& c : refs["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(test::show_ids(tok.encode(text, c["add_special"], c["parse_special"])), test::show_ids(c["ids"].get<std::vector<int32_t>>()))
        << "text " << nlohmann::json(text).dump();
    ++n;
  }
  EXPECT_GT(n, 100);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(PreTokenizers, TokenizerHfRefTest,
                         testing::Values("smollm2", "smollm2_gpt2", "smollm2_llama_bpe", "smollm2_qwen2", "gemma3",
                                         "gemma3_space_prefix", "gemma3+split"));

// Metaspace with prepend_scheme "first" (Mistral, newer Llama conversions):
// U+2581 before the text's start only, not after each added token as the
// Prepend normalizer (and llama.cpp) do.
TEST(TokenizerHf, MetaspaceFirstPrefixesOnlyTheStart) {
  auto folder = [](const std::string& name, const std::string& options) {
    const std::string dir = test::temp_dir("tokenizer_hf_" + name);
    EXPECT_EQ(test::run_command(std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/make_hf_folder.py " +
                                test::gemma3_path() + " " + dir + " --vocab-only --add-bos false" + options),
              0);
    Tokenizer tok(load_tokenizer_hf(dir).data);
    std::filesystem::remove_all(dir);
    return tok;
  };
  const Tokenizer first = folder("metaspace", " --space-prefix true --metaspace");
  const Tokenizer every = folder("prepend", " --space-prefix true");
  const Tokenizer none = folder("plain", " --space-prefix false");
  const int32_t turn = first.find("<start_of_turn>");
  ASSERT_GE(turn, 0);
  std::vector<int32_t> want = every.encode("Hi", false, false);  // "\u2581Hi"
  want.push_back(turn);
  for (int32_t id : none.encode("user says", false, false)) want.push_back(id);
  EXPECT_EQ(test::show_ids(first.encode("Hi<start_of_turn>user says", false, true)), test::show_ids(want));
  EXPECT_NE(test::show_ids(every.encode("Hi<start_of_turn>user says", false, true)), test::show_ids(want));  // there "user" gets the prefix
}

// A template in a file of its own: chat_template.jinja wins over
// tokenizer_config.json's (as in transformers); a processor's
// chat_template.json serves where there is no other.
TEST(TokenizerHf, ReadsTheChatTemplateFiles) {
  const TokenizerData data = load_tokenizer_data(GgufFile::open(test::smollm2_path()));
  const std::string dir = test::temp_dir("tokenizer_hf_template_files");
  write_tokenizer_hf(data, "{{ 'from tokenizer_config' }}", dir);
  std::ofstream(dir + "/chat_template.json") << R"({"chat_template": "{{ 'from the processor' }}"})";
  EXPECT_EQ(load_tokenizer_hf(dir).chat_template, "{{ 'from tokenizer_config' }}");
  std::ofstream(dir + "/chat_template.jinja") << "{{ 'from the jinja file' }}\n";
  EXPECT_EQ(load_tokenizer_hf(dir).chat_template, "{{ 'from the jinja file' }}\n");
  std::filesystem::remove(dir + "/chat_template.jinja");
  std::filesystem::create_directories(dir + "/none");
  write_tokenizer_hf(data, "", dir + "/none");
  std::filesystem::copy_file(dir + "/chat_template.json", dir + "/none/chat_template.json");
  EXPECT_EQ(load_tokenizer_hf(dir + "/none").chat_template, "{{ 'from the processor' }}");
}

// write_tokenizer_hf (what `basalt quantize` writes for a GGUF source) reads
// back as the same tokenizer: the same ids on every reference string, for the
// byte-level BPE SmolLM2 and the SentencePiece Gemma 3 vocabularies.
TEST(TokenizerHf, WrittenTokenizerReadsBack) {
  for (const std::string base : {"smollm2", "gemma3"}) {
    const TokenizerData data = load_tokenizer_data(GgufFile::open(base == "gemma3" ? test::gemma3_path() : test::smollm2_path()));
    const std::string dir = test::temp_dir("tokenizer_hf_written_" + base);
    write_tokenizer_hf(data, "{{ messages }}", dir);
    HfTokenizer back = load_tokenizer_hf(dir);
    EXPECT_EQ(back.chat_template, "{{ messages }}");
    const Tokenizer original(data), written(std::move(back.data));
    EXPECT_EQ(written.n_vocab(), original.n_vocab());
    EXPECT_EQ(written.bos_id(), original.bos_id());
    EXPECT_EQ(written.eos_id(), original.eos_id());
    EXPECT_EQ(written.add_bos(), original.add_bos());
    std::ifstream in(test::data_path("tokenizer/" + base + ".json"));
    const nlohmann::json refs = nlohmann::json::parse(in);
    int n = 0;
    for (const auto& c : refs["cases"]) {
      const std::string text = c["text"];
      ASSERT_EQ(test::show_ids(written.encode(text, c["add_special"], c["parse_special"])),
                test::show_ids(original.encode(text, c["add_special"], c["parse_special"])))
          << base << ": " << nlohmann::json(text).dump();
      ++n;
    }
    EXPECT_GT(n, 100);
    std::filesystem::remove_all(dir);
  }
}

// A tokenizer.json whose pre_tokenizer is Split steps no name fits (as
// DeepSeek's, Falcon's or Bloom's) runs those regexes as they are: written
// from each regex pre-tokenizer of the SmolLM2 vocabulary, read back, it
// gives llama.cpp's ids under that pre-tokenizer's name.
TEST(TokenizerHf, SplitRegexesGiveLlamaCppsIds) {
  TokenizerData base = load_tokenizer_data(GgufFile::open(test::smollm2_path()));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::data_path("tokenizer"))) {
    const std::string name = entry.path().stem().string();
    if (name.rfind("smollm2_pre_", 0) != 0) continue;
    std::ifstream in(entry.path());
    const nlohmann::json refs = nlohmann::json::parse(in);
    TokenizerData data = base;
    data.pre = refs["overrides"]["pre"];
    const std::string dir = test::temp_dir("tokenizer_hf_split_" + name);
    write_tokenizer_hf(data, "", dir);
    HfTokenizer back = load_tokenizer_hf(dir);
    EXPECT_FALSE(back.data.pre_regexes.empty()) << name << ": read by name, not as regexes";
    const Tokenizer tok(std::move(back.data));
    for (const auto& c : refs["cases"]) {
      if (c["add_special"]) continue;  // BOS comes from tokenizer_config.json, not the pre-tokenizer
      const std::string text = c["text"];
      EXPECT_EQ(test::show_ids(tok.encode(text, false, c["parse_special"])), test::show_ids(c["ids"].get<std::vector<int32_t>>()))
          << name << ": " << nlohmann::json(text).dump();
    }
    std::filesystem::remove_all(dir);
    ++files;
  }
  EXPECT_GE(files, 10);
}

std::string tokenizer_json_error(const std::string& tokenizer_json) {
  const std::string dir = test::temp_dir("tokenizer_hf_bad");
  std::ofstream(dir + "/tokenizer.json") << tokenizer_json;
  try {
    load_tokenizer_hf(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerHf, BadFilesAreErrors) {
  const std::string bl = R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})";
  const std::pair<std::string, std::string> cases[] = {
      {"{", "not valid JSON"},
      {"[]", "no model object"},
      {R"({"model": {"type": "Unigram"}})", "Unigram is not supported"},
      {R"({"model": {"type": "BPE", "vocab": {}}, "pre_tokenizer": {"type": "Whitespace"}})", "pre-tokenizer not supported"},
      {R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {}}, )" + bl + "}", "SentencePiece-style pre-tokenizer not supported"},
      {R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {}}, "normalizer": {"type": "NFKC"}})", "normalizer not supported"},
      {R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {}}})", "without spaces mapped to U+2581"},
      {R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0}, "merges": ["a a"]},
           "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}})",
       "not in the vocabulary"},
      {R"({"model": {"type": "BPE"}, )" + bl + "}", "model.vocab is missing"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 2}}, )" + bl + "}", "no token has id 1"},
      {R"({"model": {"type": "BPE", "vocab": {"a": -1}}, )" + bl + "}", "has id -1"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [3]}, )" + bl + "}", "malformed merge"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [{"id": 0, "content": "b"}], )" + bl + "}", "is both"},
      // fields of the wrong type (the fuzzer's find: nlohmann's value() threw past the loader)
      {R"({"model": {"type": 5}})", "has the wrong type"},
      {R"({"model": {"type": "BPE", "byte_fallback": "yes", "vocab": {}}})", "has the wrong type"},
  };
  for (const auto& [text, message] : cases) {
    const std::string err = tokenizer_json_error(text);
    EXPECT_NE(err.find(message), std::string::npos) << text << ": got \"" << err << "\"";
  }
  EXPECT_NE(tokenizer_json_error("").find("not valid JSON"), std::string::npos);
}

// A Split regex PCRE2 cannot compile is an error naming it; a Split behavior
// other than Isolated is refused by name.
TEST(TokenizerHf, BadSplitRegexesAreErrors) {
  TokenizerData data = load_tokenizer_data(GgufFile::open(test::smollm2_path()));
  data.pre.clear();
  data.pre_regexes = {"\\p{N}", "(unclosed"};
  const std::string dir = test::temp_dir("tokenizer_hf_bad_regex");
  write_tokenizer_hf(data, "", dir);
  try {
    Tokenizer tok(load_tokenizer_hf(dir).data);
    ADD_FAILURE() << "a regex that does not compile was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pre-tokenizer regex (unclosed"), std::string::npos) << e.what();
  }
  const std::string merged =
      R"({"model": {"type": "BPE", "vocab": {}}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"},
          "behavior": "MergedWithPrevious", "invert": false}})";
  EXPECT_NE(tokenizer_json_error(merged).find("pre-tokenizer not supported"), std::string::npos) << tokenizer_json_error(merged);
  std::filesystem::remove_all(dir);
}

TEST(TokenizerHf, NoTokenizerJson) {
  const std::string dir = test::temp_dir("tokenizer_hf_none");
  try {
    load_tokenizer_hf(dir);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace basalt
