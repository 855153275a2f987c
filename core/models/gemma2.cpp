// SPDX-License-Identifier: MIT
// Gemma 2: Gemma's graph (core/models/blocks.h) without Q/K norms, every
// other layer local (a sliding window, layers 0, 2, ...), one RoPE base, and
// soft-capping of the attention scores (attn_logit_softcapping, 50) and of
// the logits (final_logit_softcapping, 30): s -> cap tanh(s / cap). As
// llama.cpp reads its GGUF files (src/llama-model.cpp, LLM_ARCH_GEMMA2): the
// converter stored every norm weight as 1 + w, and the defaults below are its.
#include <cmath>

#include "core/gguf/gguf.h"
#include "core/models/arch.h"
#include "core/models/blocks.h"

namespace basalt {

const TensorNames& gemma3_gguf_names();  // core/models/gemma3.cpp: Gemma 2 has the same but the Q/K norms

namespace {

const TensorNames& gemma2_gguf_names() {
  static const TensorNames names = [] {
    TensorNames n = gemma3_gguf_names();
    n.q_norm = n.k_norm = "";
    return n;
  }();
  return names;
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

}  // namespace

const ArchDescriptor& gemma2_arch() {
  static const ArchDescriptor a{"gemma2",
                                {},
                                RopeStyle::neox,
                                /*attn_bias=*/false,
                                /*hf_sliding_window=*/false,
                                gemma2_gguf_names(),
                                {},
                                build_gemma_graph,
                                read_gemma2_gguf};
  return a;
}

}  // namespace basalt
