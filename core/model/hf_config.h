// SPDX-License-Identifier: MIT
// An HF model folder's config.json as a ModelSpec, for the classes the
// architectures name (core/models/<arch>.cpp: Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE,
// Gemma 2 and 3, Phi-3). HF keeps Q and K in the rotate-half order, so their RoPE is
// always the neox style.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/model/model_spec.h"

namespace basalt {

// One config.json object's keys, read with Errors that name the file and the
// key; a key set to null reads as absent. An architecture's read_hf hook
// (core/models/arch.h) reads its own keys through it.
class HfConfig {
 public:
  HfConfig(const nlohmann::json& j, const std::string& where) : j_(j), where_(where) {}

  bool has(const char* key) const;
  int64_t need_int(const char* key) const;
  int64_t get_int(const char* key, int64_t fallback) const;
  double get_float(const char* key, double fallback) const;
  bool get_bool(const char* key, bool fallback) const;
  std::string get_string(const char* key, const std::string& fallback) const;
  size_t list_size(const char* key) const;  // 0 when absent
  const std::string& where() const { return where_; }

 private:
  const nlohmann::json& j_;
  const std::string& where_;
};

// Error naming the file and the key for anything missing, of the wrong type,
// unsupported (RoPE scaling other than linear) or inconsistent.
ModelSpec spec_from_hf_config(const std::string& config_json_path);
ModelSpec spec_from_hf_config_text(const std::string& json_text, const std::string& where);

// Llama 3.1's "llama3" RoPE scaling as each pair's frequency divisor
// (ModelSpec::rope_freq_factors, from the spec's rope_theta and rope_dim).
std::vector<float> llama3_rope_factors(const ModelSpec& s, double factor, double low_freq_factor, double high_freq_factor,
                                       double original_ctx);

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
