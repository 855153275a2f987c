// SPDX-License-Identifier: MIT
// The JSON configs of an HF folder: config.json (the model's shape) and the
// GPTQ quantization config, both as config.json's nested object and as
// quantize_config.json.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/model/gptq_config.h"
#include "core/model/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace basalt;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)spec_from_hf_config_text(text, "config.json");
  } catch (const Error&) {
  }
  for (bool nested : {true, false}) {
    try {
      (void)gptq_config_from_text(text, nested ? "config.json" : "quantize_config.json", nested);
    } catch (const Error&) {
    }
  }
  return 0;
}
