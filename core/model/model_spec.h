// SPDX-License-Identifier: MIT
// An architecture's hyper-parameters, read from GGUF metadata and validated.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace basalt {

class GgufFile;

// How RoPE pairs dimensions: normal rotates (x[2i], x[2i+1]) (llama's GGUF
// files, whose Q/K weights the converter permuted); neox rotates (x[i], x[i+d/2]).
enum class RopeStyle { normal, neox };

struct ModelSpec {
  std::string arch;  // GGUF general.architecture (HF classes map to one: core/model/hf_config.h)
  std::string name;
  int64_t n_vocab = 0, n_ctx_train = 0, n_embd = 0, n_layer = 0;
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0;
  int64_t n_expert = 0, n_expert_used = 0;
  int64_t rope_dim = 0;
  float rms_eps = 1e-5f, rope_theta = 10000.0f, rope_freq_scale = 1.0f;  // position * freq_scale
  RopeStyle rope_style = RopeStyle::normal;
  bool attn_bias = false;    // qwen2: biases on Q, K, V
  bool tied_output = false;  // no output.weight: the token embedding is reused
  // Attention sees only the last sliding_window positions (0: all), its own
  // included, on the layers layer_windowed() names (their KV cache can be a
  // ring: core/graph/kv_cache.h), and the first attention_sinks positions
  // too (StreamingLLM's sinks: --attention-sinks with --window).
  int64_t sliding_window = 0;
  int64_t attention_sinks = 0;
  // Which layers have the window: all of them (0, Mistral), or all but every
  // swa_period-th (Gemma 3's local/global interleave: 6, layers 5, 11, ... global).
  int64_t swa_period = 0;
  float rope_theta_swa = 0;  // the windowed layers' RoPE base (0: rope_theta), their position scale 1
  // RoPE past the training context (core/graph/rope.h), on the layers with
  // the model's own base (not Gemma 3's local ones). YaRN (yarn_orig_ctx > 0):
  // each dimension pair's frequency between interpolated (x rope_freq_scale)
  // and kept, by how many turns it makes in the original context, and cos/sin
  // scaled by rope_attn_factor x (1 + 0.1 ln(1 / rope_freq_scale)); without
  // YaRN by rope_attn_factor alone (1 unless the model names one).
  int64_t yarn_orig_ctx = 0;
  float yarn_beta_fast = 32, yarn_beta_slow = 1, yarn_ext_factor = 1, rope_attn_factor = 1;
  // Per pair, the factor its frequency is divided by (Llama 3's "llama3"
  // type: GGUF rope_freqs.weight, or made from config.json); empty: none.
  std::vector<float> rope_freq_factors;
  // LongRoPE (Phi-3 128k, Phi-3.5, Phi-4-mini): rope_freq_factors are its
  // short factors, and a context longer than rope_long_context takes these
  // instead, with cos/sin scaled by rope_attn_factor at any length. Chosen for
  // the whole context as llama.cpp does (transformers switches as a sequence
  // grows past it, which the keys already cached do not follow).
  std::vector<float> rope_long_factors;
  int64_t rope_long_context = 0;
  float attn_scale = 0;      // queries' scale in attention (0: 1 / sqrt(head_dim))
  // Soft-capping (Gemma 2): a score s becomes cap tanh(s / cap) before the
  // softmax, a logit the same with final_softcap; 0: none.
  float attn_softcap = 0, final_softcap = 0;

  const std::vector<float>& rope_factors_for(int64_t n_ctx) const {
    return !rope_long_factors.empty() && n_ctx > rope_long_context ? rope_long_factors : rope_freq_factors;
  }

  float query_scale() const { return attn_scale > 0 ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_dim)); }

  bool layer_windowed(int64_t layer) const {
    return sliding_window > 0 && (swa_period == 0 || layer % swa_period != swa_period - 1);
  }
  int64_t window_of(int64_t layer) const { return layer_windowed(layer) ? sliding_window : 0; }  // 0: all positions
  int64_t sinks_of(int64_t layer) const { return layer_windowed(layer) ? attention_sinks : 0; }


  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  bool is_moe() const { return n_expert > 0; }
};

// Throws Error for an unknown architecture or inconsistent hyper-parameters.
ModelSpec spec_from_gguf(const GgufFile& f);
// The checks every source of a spec goes through (where: the file, for messages).
void validate_spec(const ModelSpec& s, const std::string& where);

}  // namespace basalt
