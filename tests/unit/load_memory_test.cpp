// SPDX-License-Identifier: MIT
// Loading checks what it will allocate against the memory available before
// it allocates: a GPTQ folder's converted layers and a dense model quantized
// at load (--quantize) are refused with a clear error one byte short of what
// they need, and load at exactly that (BASALT_MEMORY_AVAILABLE stands in for
// the machine's MemAvailable). The GGUF case is SessionTest's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/model/model.h"
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

}  // namespace
}  // namespace basalt
