// SPDX-License-Identifier: MIT
#include "core/model/architectures.h"

namespace basalt {

namespace {
// Mixtral-style MoE files use "llama" with expert tensors; the builder sees
// the experts in the spec.
constexpr ArchInfo kArchs[] = {
    {"llama", RopeStyle::normal, false},
    {"mistral", RopeStyle::normal, false},
    {"qwen2", RopeStyle::neox, true},
};
}  // namespace

const ArchInfo* find_arch(const std::string& name) {
  for (const ArchInfo& a : kArchs)
    if (name == a.name) return &a;
  return nullptr;
}

std::string supported_arch_names() {
  std::string s;
  for (const ArchInfo& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

}  // namespace basalt
