// SPDX-License-Identifier: MIT
// Writing a safetensors file (the layout core/safetensors/safetensors.h
// reads): the header JSON padded with spaces to a multiple of 8 bytes, then
// each tensor's bytes in the order given, tiling the data exactly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/safetensors/safetensors.h"

namespace basalt {

struct StTensorOut {
  std::string name;
  StDtype dtype;
  std::vector<int64_t> shape;
  const void* data;  // n_elements * dtype size bytes, kept alive by the caller until written
};

// Writes path + ".partial" and renames it over path at the end, so a failure
// never leaves a truncated file under the real name. Error for duplicate
// names or an I/O failure. metadata: "__metadata__" (transformers wants
// {"format": "pt"}).
void write_safetensors(const std::string& path, const std::vector<StTensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace basalt
