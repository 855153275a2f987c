// SPDX-License-Identifier: MIT
// tokenizer.json: the SmolLM2 vocabulary written as an HF folder with each
// pre-tokenizer the reference files cover (tests/python/make_hf_folder.py)
// must give llama.cpp's ids for the same strings, as the GGUF path does; and
// malformed or unsupported tokenizer.json files are clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/tokenizer/tokenizer_hf.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

class TokenizerHfRefTest : public testing::TestWithParam<std::string> {};

TEST_P(TokenizerHfRefTest, IdsMatchLlamaCpp) {
  std::ifstream in(test::data_path("tokenizer/" + GetParam() + ".json"));
  ASSERT_TRUE(in) << "tests/data/tokenizer/" << GetParam() << ".json";
  const nlohmann::json refs = nlohmann::json::parse(in);
  const std::string pre = refs["overrides"].value("pre", "smollm");
  const std::string dir = test::temp_dir("tokenizer_hf_" + GetParam());
  ASSERT_EQ(test::run_command(std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/make_hf_folder.py " +
                              test::smollm2_path() + " " + dir + " --vocab-only --pre " + pre),
            0);
  HfTokenizer hf = load_tokenizer_hf(dir);
  EXPECT_FALSE(hf.chat_template.empty());
  Tokenizer tok(std::move(hf.data));
  EXPECT_EQ(tok.n_vocab(), 49152);
  EXPECT_EQ(tok.token_to_piece(tok.eos_id(), true), "<|im_end|>");
  int n = 0;
  for (const auto& c : refs["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(show(tok.encode(text, c["add_special"], c["parse_special"])), show(c["ids"].get<std::vector<int32_t>>()))
        << "text " << nlohmann::json(text).dump();
    ++n;
  }
  EXPECT_GT(n, 100);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(PreTokenizers, TokenizerHfRefTest,
                         testing::Values("smollm2", "smollm2_gpt2", "smollm2_llama_bpe", "smollm2_qwen2"));

std::string load_error(const std::string& tokenizer_json) {
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
      {R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {}}, )" + bl + "}", "byte-fallback"},
      {R"({"model": {"type": "BPE"}, )" + bl + "}", "model.vocab is missing"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 2}}, )" + bl + "}", "no token has id 1"},
      {R"({"model": {"type": "BPE", "vocab": {"a": -1}}, )" + bl + "}", "has id -1"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [3]}, )" + bl + "}", "malformed merge"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [{"id": 0, "content": "b"}], )" + bl + "}", "is both"},
  };
  for (const auto& [text, message] : cases) {
    const std::string err = load_error(text);
    EXPECT_NE(err.find(message), std::string::npos) << text << ": got \"" << err << "\"";
  }
  EXPECT_NE(load_error("").find("not valid JSON"), std::string::npos);
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
