// SPDX-License-Identifier: MIT
// An HF model folder's config.json as a ModelSpec: LlamaForCausalLM,
// MistralForCausalLM, MixtralForCausalLM and Qwen2ForCausalLM. HF keeps
// Q and K in the rotate-half order, so their RoPE is always the neox style.
#pragma once

#include <string>

#include "core/model/model_spec.h"

namespace basalt {

// Error naming the file and the key for anything missing, of the wrong type,
// unsupported (RoPE scaling other than linear) or inconsistent.
ModelSpec spec_from_hf_config(const std::string& config_json_path);
ModelSpec spec_from_hf_config_text(const std::string& json_text, const std::string& where);

}  // namespace basalt
