// SPDX-License-Identifier: MIT
// safetensors files: the header length, its JSON and every tensor's entry.
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/safetensors/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)basalt::SafetensorsFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors");
  } catch (const basalt::Error&) {
  }
  return 0;
}
