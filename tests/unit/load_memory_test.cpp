// SPDX-License-Identifier: MIT
// Loading checks what it will allocate against the memory available before
// it allocates: a GPTQ folder's converted layers and a dense model quantized
// at load (--quantize) are refused with a clear error one byte short of what
// they need, and load at exactly that (BASALT_MEMORY_AVAILABLE stands in for
// the machine's MemAvailable). The GGUF case is SessionTest's.
// And what is resident after loading: the converted weights, not the file's
// pages beside them; a KV cache and other large buffers only where written.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/graph/kv_cache.h"
#include "core/model/model.h"
#include "core/util/aligned.h"
#include "core/util/memory.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

// The bytes the loaded model owns: its converted (qa) weights.
size_t converted_bytes(const Model& m) {
  size_t n = 0;
  for (const Weight* w : m.weights())
    if (w->format == WeightFormat::qa) n += w->total_bytes();
  return n;
}

// The error of loading `path` with `available` bytes of memory ("" if it loads).
std::string load_error(const std::string& path, size_t available, const LoadOptions& options = {}) {
  EXPECT_EQ(setenv("BASALT_MEMORY_AVAILABLE", std::to_string(available).c_str(), 1), 0);
  std::string msg;
  try {
    (void)Model::load(path, options);
  } catch (const Error& e) {
    msg = e.what();
  }
  unsetenv("BASALT_MEMORY_AVAILABLE");
  return msg;
}

void run(const std::string& cmd) { ASSERT_EQ(test::run_command(cmd), 0) << cmd; }

TEST(LoadMemory, GptqFolderNeedsItsConvertedLayers) {
  const std::string dir = test::temp_dir("load_memory_gptq"), py = std::string(BASALT_PYTHON) + " " + test::source_dir();
  run(py + "/tests/python/make_model.py " + dir + "/m.gguf --vocab tiny --type f16 --n-embd 64 --n-ff 128");
  run(py + "/tests/python/make_hf_folder.py " + dir + "/m.gguf " + dir + "/hf");
  run(py + "/tests/python/make_gptq.py " + dir + "/hf " + dir + "/gptq --group-size 32 --asym");
  const size_t need = converted_bytes(*Model::load(dir + "/gptq"));
  ASSERT_GT(need, 0u);
  const std::string msg = load_error(dir + "/gptq", need - 1);
  EXPECT_NE(msg.find(dir + "/gptq: loading its weights needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("of memory is available"), std::string::npos) << msg;
  EXPECT_EQ(load_error(dir + "/gptq", need), "");
}

TEST(LoadMemory, QuantizingAtLoadNeedsItsTiles) {
  const std::string dir = test::temp_dir("load_memory_rtn");
  run(std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/make_model.py " + dir +
      "/m.gguf --vocab tiny --type f32 --n-embd 64 --n-ff 128 --experts 4");
  for (RtnType t : {RtnType::q8_0, RtnType::q4_0}) {
    LoadOptions options;
    options.quantize = t;
    const size_t need = converted_bytes(*Model::load(dir + "/m.gguf", options));
    ASSERT_GT(need, 0u);
    const std::string msg = load_error(dir + "/m.gguf", need - 1, options);
    EXPECT_NE(msg.find(std::string("quantizing the model's dense weights to ") + rtn_type_name(t) + " needs"),
              std::string::npos)
        << msg;
    EXPECT_EQ(load_error(dir + "/m.gguf", need, options), "") << rtn_type_name(t);
  }
}

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(LoadMemory, LargeBuffersAreResidentOnlyWhereWritten) {
  {
    const int64_t before = resident_memory_bytes();
    ASSERT_GT(before, 0);
    AlignedBytes b = aligned_alloc_bytes(64 * kMiB);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % (2 * kMiB), 0u);
    const int64_t allocated = resident_memory_bytes();
    EXPECT_LT(allocated - before, 4 * kMiB) << "allocating made the buffer resident";
    for (int64_t i = 0; i < 64 * kMiB; i += 4096) ASSERT_EQ(b.get()[i], 0) << i;  // zeroed (reads map no memory)
    std::fill_n(b.get(), 24 * kMiB, uint8_t{1});
    const int64_t written = resident_memory_bytes();
    EXPECT_GT(written - before, 22 * kMiB);
    EXPECT_LT(written - before, 30 * kMiB) << "writing 24 MiB made more resident";
    b.reset();
    EXPECT_LT(resident_memory_bytes() - before, 4 * kMiB) << "freeing kept the pages";
  }
}

TEST(LoadMemory, KvCacheIsResidentOnlyForItsPositions) {
  ModelSpec spec;
  spec.n_layer = 8, spec.n_head = 8, spec.n_head_kv = 8, spec.head_dim = 64, spec.n_embd = 512;
  const int64_t before = resident_memory_bytes();
  KvCache kv(spec, 65536, 1);  // 512 MiB of f16 keys and values
  ASSERT_GE(static_cast<int64_t>(kv.bytes()), 512 * kMiB);
  EXPECT_LT(resident_memory_bytes() - before, 4 * kMiB);
  const std::vector<float> key(static_cast<size_t>(spec.kv_dim()), 1.0f);
  for (int64_t layer = 0; layer < spec.n_layer; ++layer)
    for (int64_t pos = 0; pos < 256; ++pos) kv.store(layer, 0, pos, key.data(), key.data());
  // 256 positions x 8 layers x 2 KiB (keys and values of 512 f16 each) = 4
  // MiB, on one 2 MiB page for each layer's keys and each layer's values.
  EXPECT_LE(resident_memory_bytes() - before, 36 * kMiB);
}

// A GGUF's quantized tensors are converted to the engine's layout: the file's
// pages are let go as each is converted, so loading costs the converted
// weights once, not the file beside them (issue 25's "memory that grows only
// with the cache").
TEST(LoadMemory, GgufResidentIsTheConvertedWeightsNotTheFile) {
  const std::string dir = test::temp_dir("load_memory_resident");
  run(std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/make_model.py " + dir +
      "/m.gguf --vocab tiny --type q4_0 --n-embd 512 --n-ff 2048 --n-layer 8 --n-head 8 --n-head-kv 8");
  const int64_t file = static_cast<int64_t>(std::filesystem::file_size(dir + "/m.gguf"));
  (void)Model::load(dir + "/m.gguf");  // once first: the loader's own code pages become resident
  const int64_t before = resident_memory_bytes();
  std::unique_ptr<Model> m = Model::load(dir + "/m.gguf");
  const int64_t loaded = resident_memory_bytes() - before;
  const int64_t converted = static_cast<int64_t>(converted_bytes(*m));
  ASSERT_GT(converted, file * 9 / 10);  // nearly all of the file is converted
  EXPECT_LT(loaded, converted + file / 8) << "file " << file << " B, converted " << converted << " B";
}

}  // namespace
}  // namespace basalt
