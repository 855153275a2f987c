// SPDX-License-Identifier: MIT
// tokenizer.json files: load_tokenizer_hf on a folder holding the input as
// its tokenizer.json, and a tokenizer that loads encodes and decodes a text.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/tokenizer_hf.h"
#include "tests/fuzz/scratch_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace basalt;
  static const fuzz::ScratchDir scratch("tokenizer");
  const std::string dir = scratch.path().string();
  if (FILE* out = std::fopen((dir + "/tokenizer.json").c_str(), "wb")) {
    std::fwrite(data, 1, size, out);
    std::fclose(out);
  }
  try {
    HfTokenizer hf = load_tokenizer_hf(dir);
    Tokenizer t(std::move(hf.data));
    (void)t.decode(t.encode("Hello, world! \xC3\xA9t\xC3\xA9 <|im_start|> 12345", true, true), true);
  } catch (const Error&) {
  }
  return 0;
}
