// SPDX-License-Identifier: MIT
// The table of supported architectures: adding one is a row here and, if its
// graph differs, a builder in core/models/.
#pragma once

#include <string>

#include "core/model/model_spec.h"

namespace basalt {

struct ArchInfo {
  const char* name;  // GGUF general.architecture
  RopeStyle rope_style;
  bool attn_bias;
};

const ArchInfo* find_arch(const std::string& name);
std::string supported_arch_names();

}  // namespace basalt
