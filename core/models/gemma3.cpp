// SPDX-License-Identifier: MIT
// Gemma 3 (text): Gemma's graph (core/models/blocks.h) with RMS norms on each
// head's Q and K before RoPE; local layers (a sliding window, RoPE base
// rope_theta_swa) interleaved with a global one every swa_period layers. As
// llama.cpp reads its GGUF files: the converter stored every norm weight as
// 1 + w, so the norms are plain RMS norms here. No HF class yet (its norm
// weights are the w alone).
#include <cmath>

#include "core/gguf/gguf.h"
#include "core/models/arch.h"
#include "core/models/blocks.h"

namespace basalt {

const TensorNames& gemma3_gguf_names() {
  static const TensorNames names = {
    "token_embd", "output_norm", "output",
    "blk.{i}.attn_norm", "blk.{i}.ffn_norm",
    "blk.{i}.attn_q", "blk.{i}.attn_k", "blk.{i}.attn_v", "blk.{i}.attn_output",
    "blk.{i}.ffn_gate", "blk.{i}.ffn_up", "blk.{i}.ffn_down",
    "", "", "", "",
    "blk.{i}.attn_q_norm", "blk.{i}.attn_k_norm",
    "blk.{i}.post_attention_norm", "blk.{i}.post_ffw_norm"};
  return names;
}

namespace {

// llama.cpp's defaults where the file says nothing: a global layer every 6th,
// local RoPE base 10000, queries scaled by HF's query_pre_attn_scalar^-1/2,
// which GGUF does not carry: head_dim but for the 27B (62 layers), whose
// scalar is n_embd / n_head (src/llama-model.cpp, LLM_ARCH_GEMMA3).
void read_gemma3_gguf(const GgufFile& f, ModelSpec& s) {
  s.sliding_window = f.get_int("gemma3.attention.sliding_window").value_or(0);
  s.swa_period = f.get_int("gemma3.attention.sliding_window_pattern").value_or(6);
  s.rope_theta_swa = static_cast<float>(f.get_float("gemma3.rope.freq_base_swa").value_or(10000.0));
  if (s.n_layer == 62) s.attn_scale = 1.0f / std::sqrt(static_cast<float>(s.n_embd / s.n_head));
  s.final_softcap = static_cast<float>(f.get_float("gemma3.final_logit_softcapping").value_or(0.0));
}

}  // namespace

const ArchDescriptor& gemma3_arch() {
  static const ArchDescriptor a{"gemma3",
                                {},
                                RopeStyle::neox,
                                /*attn_bias=*/false,
                                /*hf_sliding_window=*/false,
                                gemma3_gguf_names(),
                                {},
                                build_gemma_graph,
                                read_gemma3_gguf};
  return a;
}

}  // namespace basalt
