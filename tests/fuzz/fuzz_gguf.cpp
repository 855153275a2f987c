// SPDX-License-Identifier: MIT
// GGUF files: the header, metadata and tensor infos (GgufFile), the
// tokenizer they carry, and, for a file that parses, Model::load's
// validation and conversion from a file on disk.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/tokenizer_gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace basalt;
  try {
    GgufFile f = GgufFile::from_memory(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
    try {
      Tokenizer t(load_tokenizer_data(f));
      (void)t.decode(t.encode("Hello, world! <|im_start|>", true, true));
    } catch (const Error&) {
    }
  } catch (const Error&) {
    return 0;
  }
  static const std::string path = "/tmp/basalt-fuzz-" + std::to_string(getpid()) + ".gguf";
  if (FILE* out = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, out);
    std::fclose(out);
    try {
      (void)Model::load(path);
    } catch (const Error&) {
    }
    std::remove(path.c_str());
  }
  return 0;
}
