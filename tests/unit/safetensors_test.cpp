// SPDX-License-Identifier: MIT
// safetensors parsing: a valid file and folder read back exactly; every kind
// of malformed header, and sharded indexes that disagree with their shards,
// give an Error that names the problem (never a crash).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/safetensors/safetensors.h"
#include "core/safetensors/safetensors_writer.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

std::vector<uint8_t> file_bytes(const std::string& header, size_t data_bytes, uint8_t fill = 0xAB) {
  const uint64_t n = header.size();
  std::vector<uint8_t> b(8 + n);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(n >> (8 * i));
  std::copy(header.begin(), header.end(), b.begin() + 8);
  for (size_t i = 0; i < data_bytes; ++i) b.push_back(static_cast<uint8_t>(fill + i));
  return b;
}

// The error message of opening these bytes ("" if it opened).
std::string open_error(const std::vector<uint8_t>& bytes) {
  try {
    SafetensorsFile::from_bytes(bytes, "t.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kValid =
    R"({"__metadata__": {"format": "pt"}, "a": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 12]},)"
    R"( "b": {"dtype": "I32", "shape": [4], "data_offsets": [12, 28]}, "c": {"dtype": "BF16", "shape": [], "data_offsets": [28, 30]}})";

TEST(Safetensors, ReadsAValidFile) {
  const auto f = SafetensorsFile::from_bytes(file_bytes(kValid, 30));
  ASSERT_EQ(f.tensors().size(), 3u);
  const StTensor* a = f.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, StDtype::f16);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->n_bytes, 12u);
  EXPECT_EQ(a->data[0], 0xAB);
  const StTensor* b = f.find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->data[0], static_cast<uint8_t>(0xAB + 12));
  EXPECT_EQ(f.find("c")->n_elements(), 1);
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_EQ(f.metadata().at("format"), "pt");
}

// What write_safetensors writes, the reader opens with the same names, dtypes,
// shapes, bytes and metadata; a name given twice is an error that writes nothing.
TEST(Safetensors, WriterRoundTrips) {
  const std::string path = test::temp_dir("st_writer") + "/w.safetensors";
  const std::vector<int32_t> ints = {1, -2, 3, 1 << 30, 5, 6};
  const std::vector<uint16_t> halves = {0x3C00, 0xC000, 0x7BFF};
  const float scalar = 2.5f;
  write_safetensors(path, {{"ints", StDtype::i32, {2, 3}, ints.data()},
                           {"halves", StDtype::f16, {3}, halves.data()},
                           {"scalar", StDtype::f32, {}, &scalar}});
  const SafetensorsFile f = SafetensorsFile::open(path);
  ASSERT_EQ(f.tensors().size(), 3u);
  const StTensor* a = f.find("ints");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, StDtype::i32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(0, std::memcmp(a->data, ints.data(), sizeof(int32_t) * ints.size()));
  EXPECT_EQ(0, std::memcmp(f.find("halves")->data, halves.data(), 6));
  EXPECT_EQ(f.find("scalar")->n_bytes, 4u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));

  const std::string dup = test::temp_dir("st_writer_dup") + "/d.safetensors";
  EXPECT_THROW(write_safetensors(dup, {{"x", StDtype::f32, {}, &scalar}, {"x", StDtype::f32, {}, &scalar}}), Error);
  EXPECT_FALSE(std::filesystem::exists(dup));
  EXPECT_THROW(write_safetensors("/nonexistent-dir/x.safetensors", {{"x", StDtype::f32, {}, &scalar}}), Error);
}

TEST(Safetensors, EveryTruncationIsAnError) {
  const auto good = file_bytes(kValid, 30);
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_NE(open_error(cut), "") << "truncated to " << n << " bytes";
  }
}

struct Bad {
  const char* what;
  std::string header;
  size_t data_bytes;
  const char* message;  // a part of the expected message
};

TEST(Safetensors, MalformedHeadersAreErrors) {
  const std::vector<Bad> cases = {
      {"not JSON", "{\"a\": ", 0, "not valid JSON"},
      {"an array", "[1, 2]", 0, "not a JSON object"},
      {"entry not an object", R"({"a": 3})", 0, "not an object"},
      {"no dtype", R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", 4, "no dtype"},
      {"no shape", R"({"a": {"dtype": "F32", "data_offsets": [0, 4]}})", 4, "no shape"},
      {"no offsets", R"({"a": {"dtype": "F32", "shape": [1]}})", 4, "no data_offsets"},
      {"unknown dtype", R"({"a": {"dtype": "F17", "shape": [1], "data_offsets": [0, 4]}})", 4, "unknown dtype"},
      {"negative dim", R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, "non-negative"},
      {"fractional dim", R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4, "non-negative"},
      {"huge shape", R"({"a": {"dtype": "F32", "shape": [1099511627776, 1099511627776], "data_offsets": [0, 4]}})", 4, "absurdly"},
      {"too many dims", R"({"a": {"dtype": "F32", "shape": [1,1,1,1,1,1,1,1,1], "data_offsets": [0, 4]}})", 4, "dimensions"},
      {"offsets reversed", R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4, "end before"},
      {"offsets one number", R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4]}})", 4, "[begin, end]"},
      {"past the data", R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4, "past the"},
      {"size mismatch", R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 4, "expected 8"},
      {"overlap", R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8, "overlaps"},
      {"hole", R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8, "belong to no tensor"},
      {"trailing bytes", R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 12, "after the last tensor"},
      {"duplicate name", R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8, "appears twice"},
      {"metadata not strings", R"({"__metadata__": {"x": 1}})", 0, "not a string"},
      {"empty name", R"({"": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4, "empty name"},
      {"invalid UTF-8 name", "{\"\xff\xfe\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "not valid JSON"},
  };
  for (const Bad& c : cases) {
    const std::string err = open_error(file_bytes(c.header, c.data_bytes));
    EXPECT_NE(err.find(c.message), std::string::npos) << c.what << ": got \"" << err << "\"";
    EXPECT_NE(err.find("t.safetensors"), std::string::npos) << c.what << ": the message names the file";
  }
}

TEST(Safetensors, HeaderLengthPastTheFileOrAbsurd) {
  std::vector<uint8_t> b = file_bytes(kValid, 30);
  b[0] = 0xFF, b[1] = 0xFF;  // header length past the end
  EXPECT_NE(open_error(b).find("past the end"), std::string::npos);
  b[7] = 0x7F;  // ~2^62
  EXPECT_NE(open_error(b).find("over the limit"), std::string::npos);
}

TEST(Safetensors, RandomCorruptionNeverCrashes) {
  const auto good = file_bytes(kValid, 30);
  uint32_t seed = 1;
  int errors = 0;
  for (int i = 0; i < 3000; ++i) {
    auto b = good;
    for (int k = 0; k < 3; ++k) {
      seed = seed * 1664525u + 1013904223u;
      b[seed % b.size()] = static_cast<uint8_t>(seed >> 24);
    }
    if (!open_error(b).empty()) ++errors;
  }
  EXPECT_GT(errors, 1000);  // most corruptions are caught; none crashed
}

class SafetensorsFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("basalt_st_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::vector<uint8_t>& bytes) {
    std::ofstream(dir_ / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::string open_error() {
    try {
      SafetensorsSet::open_folder(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::filesystem::path dir_;
};

const char* kShard1 = R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
const char* kShard2 = R"({"y": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
const char* kIndex = R"({"metadata": {"total_size": 12}, "weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})";

TEST_F(SafetensorsFolder, SingleFile) {
  write("model.safetensors", file_bytes(kShard1, 4));
  const auto s = SafetensorsSet::open_folder(dir_.string());
  EXPECT_EQ(s.n_files(), 1u);
  ASSERT_NE(s.find("x"), nullptr);
  EXPECT_EQ(s.tensors().size(), 1u);
}

TEST_F(SafetensorsFolder, ShardsThroughTheIndex) {
  write("a.safetensors", file_bytes(kShard1, 4));
  write("b.safetensors", file_bytes(kShard2, 8));
  write("model.safetensors.index.json", std::string(kIndex));
  const auto s = SafetensorsSet::open_folder(dir_.string());
  EXPECT_EQ(s.n_files(), 2u);
  ASSERT_NE(s.find("y"), nullptr);
  EXPECT_EQ(s.find("y")->shape, std::vector<int64_t>{2});
}

TEST_F(SafetensorsFolder, NothingThere) { EXPECT_NE(open_error().find("no model.safetensors"), std::string::npos); }

TEST_F(SafetensorsFolder, IndexProblems) {
  write("a.safetensors", file_bytes(kShard1, 4));
  write("b.safetensors", file_bytes(kShard2, 8));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "not valid JSON"},
      {R"({"metadata": {}})", "no weight_map"},
      {R"({"weight_map": {}})", "weight_map is empty"},
      {R"({"weight_map": {"x": 3}})", "not a file name"},
      {R"({"weight_map": {"x": "../a.safetensors"}})", "not a file in the folder"},
      {R"({"weight_map": {"x": "/etc/passwd"}})", "not a file in the folder"},
      {R"({"weight_map": {"x": "c.safetensors"}})", "is missing"},
      {R"({"weight_map": {"x": "a.safetensors", "z": "a.safetensors"}})", "in no shard"},
      {R"({"weight_map": {"x": "b.safetensors", "y": "a.safetensors"}})", "the index says"},
  };
  for (const auto& [index, message] : cases) {
    write("model.safetensors.index.json", index);
    const std::string err = open_error();
    EXPECT_NE(err.find(message), std::string::npos) << index << ": got \"" << err << "\"";
  }
}

TEST_F(SafetensorsFolder, ShardCountIsBounded) {
  std::string index = R"({"weight_map": {)";
  for (size_t i = 0; i <= SafetensorsSet::kMaxShards; ++i)
    index += (i ? ", " : "") + std::string("\"t") + std::to_string(i) + "\": \"s" + std::to_string(i) + ".safetensors\"";
  write("model.safetensors.index.json", index + "}}");
  EXPECT_NE(open_error().find("more than 4096 shards, the most basalt opens"), std::string::npos) << open_error();
}

TEST_F(SafetensorsFolder, TensorInTwoShards) {
  write("a.safetensors", file_bytes(kShard1, 4));
  write("b.safetensors", file_bytes(kShard1, 4));
  write("model.safetensors.index.json", std::string(R"({"weight_map": {"x": "a.safetensors", "w": "b.safetensors"}})"));
  EXPECT_NE(open_error().find("in two shards"), std::string::npos);
}

TEST_F(SafetensorsFolder, BadShardNamesTheShard) {
  write("a.safetensors", file_bytes(R"({"x": 1})", 0));
  write("model.safetensors.index.json", std::string(R"({"weight_map": {"x": "a.safetensors"}})"));
  EXPECT_NE(open_error().find("a.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace basalt
