// SPDX-License-Identifier: MIT
// Gemma 2: Gemma's graph (core/models/blocks.h) without Q/K norms, every
// other layer local (a sliding window, layers 0, 2, ...), one RoPE base, and
// soft-capping of the attention scores (attn_logit_softcapping, 50) and of
// the logits (final_logit_softcapping, 30): s -> cap tanh(s / cap). As
// llama.cpp reads its GGUF files (src/llama-model.cpp, LLM_ARCH_GEMMA2): the
// converter stored every norm weight as 1 + w, and the defaults below are its;
// HF folders store the w alone (hf_norm_offset).
#include <cmath>

#include "core/gguf/gguf.h"
#include "core/models/arch.h"
#include "core/models/blocks.h"

namespace basalt {

// core/models/gemma3.cpp: Gemma 2 has the same names but the Q/K norms, and
// the same config.json keys but the local RoPE base.
const TensorNames& gemma3_gguf_names();
const TensorNames& gemma3_hf_names();
void read_gemma_hf(const HfConfig& c, ModelSpec& s);
void write_gemma_hf(const ModelSpec& s, nlohmann::json& c);

namespace {

TensorNames without_qk_norms(TensorNames n) {
  n.q_norm = n.k_norm = "";
  return n;
}

// Queries scaled by HF's query_pre_attn_scalar^-1/2, which GGUF does not
// carry: head_dim but for the 27B (46 layers), whose scalar is n_embd / n_head.
void read_gemma2_gguf(const GgufFile& f, ModelSpec& s) {
  s.sliding_window = f.get_int("gemma2.attention.sliding_window").value_or(4096);
  s.swa_period = 2;
  s.attn_softcap = static_cast<float>(f.get_float("gemma2.attn_logit_softcapping").value_or(50.0));
  s.final_softcap = static_cast<float>(f.get_float("gemma2.final_logit_softcapping").value_or(30.0));
  if (s.n_layer == 46) s.attn_scale = 1.0f / std::sqrt(static_cast<float>(s.n_embd / s.n_head));
}

// transformers' Gemma2Config defaults, for keys a config.json leaves out.
constexpr const char* kGemma2Defaults = R"({"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216,
  "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 8192, "rms_norm_eps": 1e-6,
  "rope_theta": 10000.0, "query_pre_attn_scalar": 256, "sliding_window": 4096,
  "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0, "tie_word_embeddings": true})";

}  // namespace

const ArchDescriptor& gemma2_arch() {
  static const ArchDescriptor a{"gemma2",
                                {{.name = "Gemma2ForCausalLM", .model_type = "gemma2", .defaults = kGemma2Defaults}},
                                RopeStyle::neox,
                                /*attn_bias=*/false,
                                /*hf_sliding_window=*/true,
                                /*hf_swa_period=*/2,
                                without_qk_norms(gemma3_gguf_names()),
                                without_qk_norms(gemma3_hf_names()),
                                build_gemma_graph,
                                read_gemma2_gguf,
                                read_gemma_hf,
                                write_gemma_hf,
                                /*hf_norm_offset=*/1.0f};
  return a;
}

}  // namespace basalt
