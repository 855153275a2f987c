// SPDX-License-Identifier: MIT
#include "core/model/model_spec.h"

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
  std::string scaling = f.get_string(a + "rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    double factor = f.get_float(a + "rope.scaling.factor").value_or(1.0);
    if (!(factor > 0)) throw Error(f.path() + ": rope.scaling.factor must be positive");
    s.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none") {
    throw Error(f.path() + ": RoPE scaling type '" + scaling + "' is not supported (supported: none, linear)");
  }
  s.rope_style = info->gguf_rope;
  s.attn_bias = info->attn_bias;
  if (info->read_gguf) info->read_gguf(f, s);

  validate_spec(s, f.path());
  return s;
}

}  // namespace basalt
