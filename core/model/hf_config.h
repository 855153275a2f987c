// SPDX-License-Identifier: MIT
// An HF model folder's config.json as a ModelSpec: LlamaForCausalLM,
// MistralForCausalLM, MixtralForCausalLM and Qwen2ForCausalLM. HF keeps
// Q and K in the rotate-half order, so their RoPE is always the neox style.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/model/model_spec.h"

namespace basalt {

// Error naming the file and the key for anything missing, of the wrong type,
// unsupported (RoPE scaling other than linear) or inconsistent.
ModelSpec spec_from_hf_config(const std::string& config_json_path);
ModelSpec spec_from_hf_config_text(const std::string& json_text, const std::string& where);

// The sampling defaults a model's authors chose (generation_config.json);
// what the file does not say stays unset. do_sample: false means greedy.
struct GenerationDefaults {
  std::optional<float> temperature, top_p, repeat_penalty;
  std::optional<int32_t> top_k;
  std::optional<bool> do_sample;
};
// An absent file gives no defaults; a malformed one is an Error.
GenerationDefaults read_generation_defaults(const std::string& generation_config_json_path);

}  // namespace basalt
