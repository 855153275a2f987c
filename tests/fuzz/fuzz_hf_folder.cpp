// SPDX-License-Identifier: MIT
// HF model folders through Model::load: config.json, generation_config.json,
// tokenizer_config.json, quantize_config.json, tokenizer.json,
// model.safetensors or a shard index and its shards, and GPTQ layers.
//
// The input is a folder packed as "\n#FILE name\n" + bytes, once per file
// (scripts/fuzz.sh packs the seeds); names other than plain file names are
// skipped, so nothing is written outside the folder.
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string_view>

#include "core/error.h"
#include "core/model/model.h"
#include "tests/fuzz/scratch_dir.h"

namespace {

bool plain_name(std::string_view s) {
  if (s.empty() || s.size() > 64 || s[0] == '.') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const basalt::fuzz::ScratchDir scratch("hf");
  const fs::path& dir = scratch.path();
  fs::remove_all(dir);
  fs::create_directories(dir);

  constexpr std::string_view kMarker = "\n#FILE ";
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  for (size_t at = in.find(kMarker); at != std::string_view::npos;) {
    const size_t name_at = at + kMarker.size(), name_end = in.find('\n', name_at);
    if (name_end == std::string_view::npos) break;
    const size_t next = in.find(kMarker, name_end);
    const std::string_view name = in.substr(name_at, name_end - name_at);
    const std::string_view body = in.substr(name_end + 1, next == std::string_view::npos ? std::string_view::npos : next - name_end - 1);
    if (plain_name(name)) {
      if (FILE* out = std::fopen((dir / name).c_str(), "wb")) {
        std::fwrite(body.data(), 1, body.size(), out);
        std::fclose(out);
      }
    }
    at = next;
  }
  try {
    (void)basalt::Model::load(dir.string());
  } catch (const basalt::Error&) {
  }
  return 0;
}
