// SPDX-License-Identifier: MIT
// The GGUF reader: valid files read back exactly; every kind of broken file
// is an Error with a message naming the problem, never a crash.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "tests/unit/gguf_builder.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

using test::f32_bytes;
using test::GgufBuilder;

GgufBuilder valid_builder() {
  GgufBuilder g;
  g.kv_str("general.architecture", "llama").kv_u32("llama.block_count", 2).kv_f32("llama.rope.freq_base", 10000.0f);
  g.kv_bool("tokenizer.ggml.add_bos_token", true).kv_strs("tokenizer.ggml.tokens", {"a", "b", "<s>"});
  g.kv_f32s("tokenizer.ggml.scores", {0.5f, -1.0f, 0.0f});
  g.tensor("w", {4, 2}, 0, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}));
  g.tensor("n", {4}, 0, f32_bytes({9, 10, 11, 12}));
  return g;
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  try {
    GgufFile::from_memory(bytes, "bad.gguf");
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("bad.gguf: ", 0), 0u) << "the message names the file: " << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "message: " << e.what();
  }
}

TEST(Gguf, ReadsValidFile) {
  GgufFile f = GgufFile::from_memory(valid_builder().bytes());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 2);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("llama.rope.freq_base")), 10000.0f);
  EXPECT_EQ(f.get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"a", "b", "<s>"}));
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores"), (std::vector<float>{0.5f, -1.0f, 0.0f}));
  EXPECT_FALSE(f.get_int("missing").has_value());
  EXPECT_THROW(f.get_int("general.architecture"), Error);  // a string, not an integer
  const GgufTensorInfo* w = f.find_tensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dims, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(w->n_bytes, 32u);
  float v[8];
  std::memcpy(v, w->data, 32);
  EXPECT_EQ(v[7], 8.0f);
  EXPECT_EQ(f.find_tensor("n")->offset % 32, 0u);
}

TEST(Gguf, ReadsVersion2) {
  GgufBuilder g = valid_builder();
  g.version = 2;
  EXPECT_EQ(GgufFile::from_memory(g.bytes()).version(), 2u);
}

TEST(Gguf, EveryTruncationIsAnError) {
  const std::vector<uint8_t> full = valid_builder().bytes();
  for (size_t len = 0; len < full.size(); ++len) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_THROW(GgufFile::from_memory(cut, "cut.gguf"), Error) << "prefix of " << len << " bytes";
  }
}

struct BadCase {
  const char* name;
  std::function<std::vector<uint8_t>()> make;
  const char* fragment;
};

std::vector<BadCase> bad_cases() {
  return {
      {"bad magic", [] { auto g = valid_builder(); g.magic = 0x12345678; return g.bytes(); }, "bad magic"},
      {"version 1", [] { auto g = valid_builder(); g.version = 1; return g.bytes(); }, "version 1"},
      {"version 4", [] { auto g = valid_builder(); g.version = 4; return g.bytes(); }, "version 4"},
      {"absurd kv count", [] { auto g = valid_builder(); g.n_kv = uint64_t{1} << 60; return g.bytes(); }, "metadata count"},
      {"absurd tensor count", [] { auto g = valid_builder(); g.n_tensors = uint64_t{1} << 62; return g.bytes(); }, "tensor count"},
      {"huge string length", [] {
         GgufBuilder g;
         g.n_kv = 1;
         GgufBuilder::put_str(g.kv_bytes, "k");
         GgufBuilder::put<uint32_t>(g.kv_bytes, 8);
         GgufBuilder::put<uint64_t>(g.kv_bytes, uint64_t{1} << 50);
         return g.bytes();
       }, "string length"},
      {"huge array count", [] {
         GgufBuilder g;
         g.n_kv = 1;
         GgufBuilder::put_str(g.kv_bytes, "k");
         GgufBuilder::put<uint32_t>(g.kv_bytes, 9);
         GgufBuilder::put<uint32_t>(g.kv_bytes, 4);
         GgufBuilder::put<uint64_t>(g.kv_bytes, uint64_t{1} << 40);
         return g.bytes();
       }, "does not fit"},
      {"more tensors than basalt reads", [] {
         auto g = valid_builder();
         g.n_tensors = GgufFile::kMaxTensors + 1;
         g.tensor_bytes.resize(g.tensor_bytes.size() + 32 * GgufFile::kMaxTensors);  // room for them all
         return g.bytes();
       }, "more than the 65536 basalt reads"},
      {"more metadata values than basalt reads", [] {  // one array of uint8: 48 bytes each in memory
         GgufBuilder g;
         g.n_kv = 1;
         GgufBuilder::put_str(g.kv_bytes, "k");
         GgufBuilder::put<uint32_t>(g.kv_bytes, 9);
         GgufBuilder::put<uint32_t>(g.kv_bytes, 0);
         GgufBuilder::put<uint64_t>(g.kv_bytes, GgufFile::kMaxMetadataValues);
         g.kv_bytes.resize(g.kv_bytes.size() + GgufFile::kMaxMetadataValues);
         return g.bytes();
       }, "key k: more than 8388608 metadata values"},
      {"arrays nested 9 deep", [] {
         GgufBuilder g;
         g.n_kv = 1;
         GgufBuilder::put_str(g.kv_bytes, "k");
         GgufBuilder::put<uint32_t>(g.kv_bytes, 9);
         for (int d = 0; d < 9; ++d) {
           GgufBuilder::put<uint32_t>(g.kv_bytes, 9);
           GgufBuilder::put<uint64_t>(g.kv_bytes, 1);
         }
         return g.bytes();
       }, "nested deeper than 8"},
      {"unknown value type", [] {
         GgufBuilder g;
         g.n_kv = 1;
         GgufBuilder::put_str(g.kv_bytes, "k");
         GgufBuilder::put<uint32_t>(g.kv_bytes, 77);
         return g.bytes();
       }, "unknown value type"},
      {"bool of 2", [] {
         GgufBuilder g;
         g.n_kv = 1;
         GgufBuilder::put_str(g.kv_bytes, "k");
         GgufBuilder::put<uint32_t>(g.kv_bytes, 7);
         GgufBuilder::put<uint8_t>(g.kv_bytes, 2);
         return g.bytes();
       }, "boolean"},
      {"invalid UTF-8 key", [] { GgufBuilder g; g.kv_u32("bad\xff\xfekey", 1); return g.bytes(); }, "UTF-8"},
      {"empty key", [] { GgufBuilder g; g.kv_u32("", 1); return g.bytes(); }, "empty"},
      {"duplicate key", [] { GgufBuilder g; g.kv_u32("a", 1).kv_u32("a", 2); return g.bytes(); }, "duplicate metadata key a"},
      {"alignment not a power of two", [] { GgufBuilder g; g.kv_u32("general.alignment", 24); return g.bytes(); }, "power of two"},
      {"unknown tensor type", [] { GgufBuilder g; g.tensor("t", {4}, 99, f32_bytes({1, 2, 3, 4})); return g.bytes(); }, "unknown tensor type"},
      {"zero dims", [] { GgufBuilder g; g.tensor("t", {}, 0, {}); return g.bytes(); }, "0 dimensions"},
      {"five dims", [] { GgufBuilder g; g.tensor("t", {1, 1, 1, 1, 1}, 0, f32_bytes({1})); return g.bytes(); }, "5 dimensions"},
      {"zero dimension", [] { GgufBuilder g; g.tensor("t", {4, 0}, 0, {}); return g.bytes(); }, "dimension 1 is 0"},
      {"element count overflow", [] {
         GgufBuilder g;
         g.tensor("t", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, {});
         return g.bytes();
       }, "overflows"},
      {"row not a block multiple", [] { GgufBuilder g; g.tensor("t", {48}, 2, std::vector<uint8_t>(27)); return g.bytes(); }, "block size"},
      {"offset past the end", [] { GgufBuilder g; g.tensor_at("t", {4}, 0, 1024); return g.bytes(); }, "past the end"},
      {"misaligned offset", [] {
         GgufBuilder g;
         g.data.resize(64);
         g.tensor_at("t", {4}, 0, 4);
         return g.bytes();
       }, "not aligned"},
      {"overlapping tensors", [] {
         GgufBuilder g;
         g.data.resize(64);
         g.tensor_at("a", {8}, 0, 0).tensor_at("b", {8}, 0, 0);
         return g.bytes();
       }, "overlap"},
      {"duplicate tensor", [] {
         GgufBuilder g;
         g.data.resize(64);
         g.tensor_at("a", {4}, 0, 0).tensor_at("a", {4}, 0, 32);
         return g.bytes();
       }, "duplicate tensor name a"},
      {"tensor data truncated", [] {
         auto b = valid_builder().bytes();
         b.resize(b.size() - 4);
         return b;
       }, "past the end"},
  };
}

TEST(Gguf, MalformedFilesAreNamedErrors) {
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.name);
    expect_error(c.make(), c.fragment);
  }
}

// Random corruption: parse or throw Error, nothing else (run under ASan to catch reads out of bounds).
TEST(Gguf, RandomCorruptionNeverCrashes) {
  const std::vector<uint8_t> full = valid_builder().bytes();
  std::mt19937 rng(1234);
  int parsed = 0, rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> b = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    try {
      GgufFile::from_memory(b);
      ++parsed;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_EQ(parsed + rejected, 3000);
  EXPECT_GT(rejected, 0);
}

TEST(Gguf, MissingFileIsAnError) { EXPECT_THROW(GgufFile::open("/nonexistent/model.gguf"), Error); }

TEST(Gguf, ReadsRealModel) {
  GgufFile f = GgufFile::open(test::smollm2_path());
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 30);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 49152u);
  EXPECT_EQ(f.tensors().size(), 272u);
  const GgufTensorInfo* t = f.find_tensor("token_embd.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, GgmlType::q8_0);
  EXPECT_EQ(t->dims, (std::vector<int64_t>{576, 49152}));
}

}  // namespace
}  // namespace basalt
