// SPDX-License-Identifier: MIT
// Tokenizers on arbitrary bytes: encode (with and without special tokens),
// decode of arbitrary ids, and the streaming decoder. The vocabularies come
// from GGUF files: BASALT_FUZZ_GGUF (paths separated by ':'), by default the
// default model's (scripts/fuzz.sh passes it). The first input byte picks
// the tokenizer and the mode.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/tokenizer_gguf.h"

namespace {
std::vector<std::unique_ptr<basalt::Tokenizer>> g_tokenizers;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* env = std::getenv("BASALT_FUZZ_GGUF");
  if (!env || !*env) {
    std::fprintf(stderr, "fuzz_tokenizer: set BASALT_FUZZ_GGUF to GGUF files (':'-separated) whose tokenizers to fuzz\n");
    std::exit(2);
  }
  std::stringstream paths(env);
  for (std::string p; std::getline(paths, p, ':');)
    if (!p.empty())
      g_tokenizers.push_back(std::make_unique<basalt::Tokenizer>(basalt::load_tokenizer_data(basalt::GgufFile::open(p))));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace basalt;
  if (size < 1) return 0;
  const Tokenizer& t = *g_tokenizers[data[0] % g_tokenizers.size()];
  const int mode = data[0] / 16 % 4;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (mode < 2) {
      const std::vector<int32_t> ids = t.encode(text, mode == 0, mode == 0);
      (void)t.decode(ids, true);
    } else {
      std::vector<int32_t> ids;  // 3 bytes an id, some out of range
      for (size_t i = 0; i + 3 <= text.size(); i += 3)
        ids.push_back(static_cast<int32_t>(static_cast<uint8_t>(text[i]) | static_cast<uint8_t>(text[i + 1]) << 8 |
                                           static_cast<uint8_t>(text[i + 2]) << 16) - 0x10000);
      if (mode == 2) {
        (void)t.decode(ids, true);
      } else {
        StreamDecoder d(t);
        for (int32_t id : ids) (void)d.feed(id);
        (void)d.flush();
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
