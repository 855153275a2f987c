// SPDX-License-Identifier: MIT
// The malformed-input table, one row per file a model is read from: each
// file of a good model cut short at every offset (every few offsets in the
// bigger ones) must end in an Error that names the file, and with random
// bytes flipped must load or end in an Error, nothing else. The GGUF row
// uses a real file's header (SmolLM2's: its metadata and tensor infos); the
// HF rows a synthetic folder (dense, sharded and GPTQ), loaded the way a
// user loads it, through Model::load. Each parser's own tests hold the
// crafted cases (huge counts and lengths, negative and overflowing sizes,
// wrong types, nesting): gguf_test, safetensors_test, hf_config_test,
// gptq_test, tokenizer_hf_test, chat_template_test, openai_api_test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/model/model.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> read_bytes(const fs::path& p, size_t max = SIZE_MAX) {
  std::ifstream in(p, std::ios::binary);
  std::vector<uint8_t> b(std::istreambuf_iterator<char>(in), {});
  if (b.size() > max) b.resize(max);
  return b;
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// The lengths to cut at: every one below `dense`, then every `stride`-th.
std::vector<size_t> cuts(size_t size, size_t dense, size_t stride) {
  std::vector<size_t> out;
  for (size_t n = 0; n < size; n += n < dense ? 1 : stride) out.push_back(n);
  return out;
}

TEST(MalformedInputs, RealGgufHeaderCutAnywhere) {
  const std::vector<uint8_t> head = read_bytes(test::smollm2_path(), 512 << 10);
  ASSERT_EQ(head.size(), size_t{512} << 10);
  int errors = 0;
  for (size_t n : cuts(head.size(), 16 << 10, 509)) {
    try {
      (void)GgufFile::from_memory(std::vector<uint8_t>(head.begin(), head.begin() + static_cast<std::ptrdiff_t>(n)),
                                  "smollm2-head.gguf");
      ADD_FAILURE() << "the first " << n << " bytes parsed";
    } catch (const Error& e) {
      ++errors;
      EXPECT_EQ(std::string(e.what()).rfind("smollm2-head.gguf: ", 0), 0u) << e.what();
    }
  }
  EXPECT_GT(errors, 16000);
}

TEST(MalformedInputs, RealGgufHeaderFlipped) {
  const std::vector<uint8_t> head = read_bytes(test::smollm2_path(), 64 << 10);
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> b = head;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 8); ++k) b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    try {
      (void)GgufFile::from_memory(std::move(b), "flipped.gguf");  // 64 KB of a 100 MB file: the tensors cannot fit
      ADD_FAILURE() << "case " << i << " parsed";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("flipped.gguf: ", 0), 0u) << e.what();
    }
  }
}

class MalformedHfFolder : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = test::temp_dir("malformed_hf");
    const std::string py = std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/";
    auto run = [](const std::string& cmd) { ASSERT_EQ(test::run_command(cmd), 0) << cmd; };
    run(py + "make_model.py " + root_ + "/m.gguf --vocab tiny --type f16 --n-embd 32 --n-layer 1 --n-ff 64 --n-head 2 --n-head-kv 1");
    run(py + "make_hf_folder.py " + root_ + "/m.gguf " + root_ + "/dense");
    run(py + "make_hf_folder.py " + root_ + "/m.gguf " + root_ + "/shards --shards 2");
    run(py + "make_gptq.py " + root_ + "/dense " + root_ + "/gptq --group-size 32 --act-order --config-in quantize_config");
  }

  // Every file of `folder` cut at each length, then flipped: errors name the file.
  static void check_folder(const std::string& folder) {
    const fs::path dir = fs::path(root_) / folder;
    ASSERT_NO_THROW((void)Model::load(dir.string())) << "the good folder must load";
    std::mt19937 rng(11);
    for (const auto& entry : fs::directory_iterator(dir)) {
      const fs::path file = entry.path();
      const std::string name = file.filename().string();
      SCOPED_TRACE(folder + "/" + name);
      const std::vector<uint8_t> good = read_bytes(file);
      // A JSON file's trailing newline can go; from its last byte on, every cut breaks it.
      size_t end = good.size();
      while (end > 0 && (good[end - 1] == '\n' || good[end - 1] == ' ')) --end;
      int cut_errors = 0;
      for (size_t n : cuts(end, 1024, 211)) {
        write_bytes(file, std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)));
        try {
          (void)Model::load(dir.string());
          ADD_FAILURE() << name << " cut to " << n << " bytes loaded";
        } catch (const Error& e) {
          ++cut_errors;
          EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << "cut to " << n << ": " << e.what();
        }
      }
      EXPECT_GT(cut_errors, 0);
      for (int i = 0; i < 60; ++i) {
        std::vector<uint8_t> b = good;
        for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
        write_bytes(file, b);
        try {
          (void)Model::load(dir.string());
        } catch (const Error&) {
        }
      }
      write_bytes(file, good);
    }
  }

  static std::string root_;
};

std::string MalformedHfFolder::root_;

TEST_F(MalformedHfFolder, DenseFolderFilesCutAnywhere) { check_folder("dense"); }
TEST_F(MalformedHfFolder, ShardedFolderFilesCutAnywhere) { check_folder("shards"); }
TEST_F(MalformedHfFolder, GptqFolderFilesCutAnywhere) { check_folder("gptq"); }

}  // namespace
}  // namespace basalt
