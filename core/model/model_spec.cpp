// SPDX-License-Identifier: MIT
#include "core/model/model_spec.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/models/arch.h"

namespace basalt {

void validate_spec(const ModelSpec& s, const std::string& where) {
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) throw Error(where + ": inconsistent hyper-parameters: " + what);
  };
  check(s.n_layer > 0 && s.n_layer <= 1024, "block_count " + std::to_string(s.n_layer));
  check(s.n_embd > 0 && s.n_embd <= (1 << 17), "embedding_length " + std::to_string(s.n_embd));
  check(s.n_head > 0 && s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0,
        "head_count " + std::to_string(s.n_head) + " is not a multiple of head_count_kv " + std::to_string(s.n_head_kv));
  check(s.head_dim > 0 && s.head_dim % 2 == 0 && s.head_dim <= 1024, "head dimension " + std::to_string(s.head_dim));
  check(s.rope_dim > 0 && s.rope_dim <= s.head_dim && s.rope_dim % 2 == 0, "rope.dimension_count " + std::to_string(s.rope_dim));
  check(s.n_ff > 0, "feed_forward_length " + std::to_string(s.n_ff));
  check(s.n_expert == 0 || (s.n_expert_used > 0 && s.n_expert_used <= s.n_expert && s.n_expert <= 512),
        "expert_used_count " + std::to_string(s.n_expert_used) + " of expert_count " + std::to_string(s.n_expert));
  check(s.rms_eps > 0 && s.rms_eps < 1, "layer_norm_rms_epsilon");
  check(s.rope_theta > 0, "rope.freq_base");
  check(s.sliding_window >= 0 && s.swa_period >= 0 && s.rope_theta_swa >= 0, "sliding window " +
        std::to_string(s.sliding_window) + ", period " + std::to_string(s.swa_period));
  check(s.n_ctx_train > 0, "context_length");
  check(s.attn_softcap >= 0 && s.final_softcap >= 0 && std::isfinite(s.attn_softcap) && std::isfinite(s.final_softcap),
        "soft-capping " + std::to_string(s.attn_softcap) + ", " + std::to_string(s.final_softcap));
  check(s.rope_freq_factors.empty() || static_cast<int64_t>(s.rope_freq_factors.size()) == s.rope_dim / 2,
        std::to_string(s.rope_freq_factors.size()) + " RoPE frequency factors for " + std::to_string(s.rope_dim / 2) + " pairs");
  check(s.rope_long_factors.empty() || static_cast<int64_t>(s.rope_long_factors.size()) == s.rope_dim / 2,
        std::to_string(s.rope_long_factors.size()) + " long RoPE factors for " + std::to_string(s.rope_dim / 2) + " pairs");
  check(s.rope_long_factors.empty() || (s.rope_long_context > 0 && !s.rope_freq_factors.empty()),
        "long RoPE factors without short ones and an original context");
  for (const auto* factors : {&s.rope_freq_factors, &s.rope_long_factors})
    for (float x : *factors) check(std::isfinite(x) && x > 0, "a RoPE frequency factor of " + std::to_string(x));
  check(s.yarn_orig_ctx >= 0 && s.yarn_beta_fast > 0 && s.yarn_beta_slow > 0 && std::isfinite(s.yarn_beta_fast) &&
            std::isfinite(s.yarn_beta_slow) && std::isfinite(s.yarn_ext_factor) && std::isfinite(s.rope_attn_factor) &&
            s.rope_attn_factor > 0,
        "YaRN parameters");
}

ModelSpec spec_from_gguf(const GgufFile& f) {
  ModelSpec s;
  s.arch = f.get_string("general.architecture").value_or("");
  const ArchDescriptor* info = find_arch(s.arch);
  if (!info) throw Error(f.path() + ": architecture '" + s.arch + "' is not supported (supported: " + supported_arch_names() + ")");
  s.name = f.get_string("general.name").value_or(s.arch);
  const std::string a = s.arch + ".";
  auto need = [&](const std::string& key) {
    auto v = f.get_int(a + key);
    if (!v) throw Error(f.path() + ": metadata key " + a + key + " is missing");
    return *v;
  };
  s.n_layer = need("block_count");
  s.n_embd = need("embedding_length");
  s.n_ff = f.get_int(a + "feed_forward_length").value_or(0);
  s.n_head = need("attention.head_count");
  s.n_head_kv = f.get_int(a + "attention.head_count_kv").value_or(s.n_head);
  s.n_ctx_train = f.get_int(a + "context_length").value_or(2048);
  s.n_expert = f.get_int(a + "expert_count").value_or(0);
  s.n_expert_used = f.get_int(a + "expert_used_count").value_or(0);
  s.rms_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  s.rope_theta = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));
  s.head_dim = f.get_int(a + "attention.key_length").value_or(s.n_head > 0 ? s.n_embd / s.n_head : 0);
  s.rope_dim = f.get_int(a + "rope.dimension_count").value_or(s.head_dim);
  const std::string scaling = f.get_string(a + "rope.scaling.type").value_or("none");
  if (scaling == "linear" || scaling == "yarn") {
    const double factor = f.get_float(a + "rope.scaling.factor").value_or(1.0);
    if (!(factor > 0)) throw Error(f.path() + ": rope.scaling.factor must be positive");
    s.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none") {
    throw Error(f.path() + ": RoPE scaling type '" + scaling + "' is not supported (supported: none, linear, yarn)");
  }
  if (scaling == "yarn") {
    s.yarn_orig_ctx = f.get_int(a + "rope.scaling.original_context_length").value_or(0);
    if (s.yarn_orig_ctx <= 0) throw Error(f.path() + ": YaRN needs rope.scaling.original_context_length");
    s.yarn_beta_fast = static_cast<float>(f.get_float(a + "rope.scaling.yarn_beta_fast").value_or(32.0));
    s.yarn_beta_slow = static_cast<float>(f.get_float(a + "rope.scaling.yarn_beta_slow").value_or(1.0));
    s.yarn_ext_factor = static_cast<float>(f.get_float(a + "rope.scaling.yarn_ext_factor").value_or(1.0));
  }
  s.rope_attn_factor = static_cast<float>(f.get_float(a + "rope.scaling.attn_factor").value_or(1.0));
  // Per-pair factors arrive as tensors (llama.cpp's converter): Llama 3.1's
  // "llama3" scaling as rope_freqs, LongRoPE's as a short and a long set.
  auto factors = [&](const char* name, std::vector<float>& out) {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) return false;
    if (t->type != GgmlType::f32 || t->dims.size() != 1) throw Error(f.path() + ": " + name + " must be a 1-D F32 tensor");
    out.resize(static_cast<size_t>(t->dims[0]));
    std::memcpy(out.data(), t->data, out.size() * 4);
    return true;
  };
  factors("rope_freqs.weight", s.rope_freq_factors);
  if (factors("rope_factors_long.weight", s.rope_long_factors)) {
    if (!factors("rope_factors_short.weight", s.rope_freq_factors))
      throw Error(f.path() + ": rope_factors_long.weight without rope_factors_short.weight");
    s.rope_long_context = f.get_int(a + "rope.scaling.original_context_length").value_or(0);
    if (s.rope_long_context <= 0) throw Error(f.path() + ": LongRoPE factors need rope.scaling.original_context_length");
  }
  s.rope_style = info->gguf_rope;
  s.attn_bias = info->attn_bias;
  if (info->read_gguf) info->read_gguf(f, s);

  validate_spec(s, f.path());
  return s;
}

}  // namespace basalt
