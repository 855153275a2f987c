// SPDX-License-Identifier: MIT
// The table of architectures: one line per core/models/<name>.cpp.
#include "core/models/arch.h"

#include <algorithm>

#include "core/error.h"
#include "core/model/model.h"

namespace basalt {

const ArchDescriptor& llama_arch();    // core/models/llama.cpp (llama 2/3, SmolLM2, Mixtral)
const ArchDescriptor& mistral_arch();  // core/models/llama.cpp (GGUF's name for the same graph)
const ArchDescriptor& qwen2_arch();    // core/models/qwen2.cpp
const ArchDescriptor& qwen3_arch();    // core/models/qwen3.cpp
const ArchDescriptor& qwen3moe_arch(); // core/models/qwen3.cpp
const ArchDescriptor& gemma2_arch();   // core/models/gemma2.cpp
const ArchDescriptor& gemma3_arch();   // core/models/gemma3.cpp
const ArchDescriptor& phi3_arch();     // core/models/phi3.cpp

const std::vector<const ArchDescriptor*>& architectures() {
  static const std::vector<const ArchDescriptor*> all = {&llama_arch(),    &mistral_arch(), &qwen2_arch(),
                                                             &qwen3_arch(),    &qwen3moe_arch(), &gemma2_arch(),
                                                             &gemma3_arch(),   &phi3_arch()};
  return all;
}

const ArchDescriptor* find_arch(const std::string& gguf_name) {
  for (const ArchDescriptor* a : architectures())
    if (gguf_name == a->name) return a;
  return nullptr;
}

const ArchDescriptor* find_arch_for_hf_class(const std::string& hf_class, const HfClass** cls) {
  for (const ArchDescriptor* a : architectures())
    for (const HfClass& c : a->hf_classes)
      if (hf_class == c.name) {
        if (cls) *cls = &c;
        return a;
      }
  return nullptr;
}

std::string supported_arch_names() {
  std::string s;
  for (const ArchDescriptor* a : architectures()) s += (s.empty() ? "" : ", ") + std::string(a->name);
  return s;
}

std::string supported_hf_class_names() {
  std::string s;
  std::vector<std::string> seen;  // Mistral's class is in two descriptors' lists
  for (const ArchDescriptor* a : architectures())
    for (const HfClass& c : a->hf_classes)
      if (std::find(seen.begin(), seen.end(), c.name) == seen.end()) {
        seen.push_back(c.name);
        s += (s.empty() ? "" : ", ") + std::string(c.name);
      }
  return s;
}

const std::vector<LayerNorm>& layer_norms() {
  static const std::vector<LayerNorm> norms = {
      {&TensorNames::attn_norm, &LayerWeights::attn_norm, false},
      {&TensorNames::ffn_norm, &LayerWeights::ffn_norm, false},
      {&TensorNames::q_norm, &LayerWeights::q_norm, true},
      {&TensorNames::k_norm, &LayerWeights::k_norm, true},
      {&TensorNames::attn_post_norm, &LayerWeights::attn_post_norm, false},
      {&TensorNames::ffn_post_norm, &LayerWeights::ffn_post_norm, false},
  };
  return norms;
}

std::string tensor_name(const std::string& pattern, int64_t layer, int64_t expert, const std::string& suffix) {
  std::string s = pattern;
  if (size_t p = s.find("{i}"); p != std::string::npos) s.replace(p, 3, std::to_string(layer));
  if (size_t p = s.find("{e}"); p != std::string::npos) {
    if (expert >= 0) s.replace(p, 3, std::to_string(expert));
    else s.erase(p > 0 && s[p - 1] == '.' ? p - 1 : p, p > 0 && s[p - 1] == '.' ? 4 : 3);
  }
  return s + suffix;
}

Graph build_graph(const Model& m) {
  const ArchDescriptor* a = find_arch(m.spec().arch);
  if (!a) throw Error("internal: no graph builder for architecture " + m.spec().arch);
  return a->build_graph(m);
}

}  // namespace basalt
