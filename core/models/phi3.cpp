// SPDX-License-Identifier: MIT
// Phi-3, Phi-3.5 and Phi-4-mini: the llama graph with Q, K and V in one
// tensor (qkv_proj; GGUF attn_qkv, or apart in some files) and the FFN's gate
// and up rows in one (gate_up_proj; GGUF ffn_up, twice n_ff rows, gate
// first), the NeoX RoPE pairing in GGUF files too. The long-context models
// carry LongRoPE's two sets of factors (ModelSpec::rope_long_factors), and
// Phi-4-mini turns 3/4 of each head (partial_rotary_factor, GGUF
// rope.dimension_count). Phi-3-mini-4k names a 2047-position window, which
// basalt applies as transformers does (llama.cpp ignores it); the 128k
// models' 262144 is past their context and changes nothing.
#include "core/gguf/gguf.h"
#include "core/models/arch.h"
#include "core/models/blocks.h"

namespace basalt {

const TensorNames& llama_gguf_names();  // core/models/llama.cpp: the other names are the same
const TensorNames& llama_hf_names();

namespace {

const TensorNames& phi3_gguf_names() {
  static const TensorNames names = [] {
    TensorNames n = llama_gguf_names();
    n.qkv = "blk.{i}.attn_qkv";  // where the file has it; else attn_q, attn_k, attn_v
    n.gate = n.up = "";
    n.gate_up = "blk.{i}.ffn_up";
    return n;
  }();
  return names;
}

const TensorNames& phi3_hf_names() {
  static const TensorNames names = [] {
    TensorNames n = llama_hf_names();
    n.q = n.k = n.v = n.gate = n.up = "";
    n.qkv = "model.layers.{i}.self_attn.qkv_proj";
    n.gate_up = "model.layers.{i}.mlp.gate_up_proj";
    return n;
  }();
  return names;
}

// The window the converter writes: 0 for Phi-4-mini, 262144 for the 128k models.
void read_phi3_gguf(const GgufFile& f, ModelSpec& s) {
  const int64_t window = f.get_int("phi3.attention.sliding_window").value_or(0);
  if (window > 0 && window < s.n_ctx_train) s.sliding_window = window;
}

}  // namespace

const ArchDescriptor& phi3_arch() {
  static const ArchDescriptor a{"phi3",
                                {{"Phi3ForCausalLM", "phi3"}},
                                RopeStyle::neox,
                                /*attn_bias=*/false,
                                /*hf_sliding_window=*/true,
                                /*hf_swa_period=*/0,
                                phi3_gguf_names(),
                                phi3_hf_names(),
                                build_llama_graph,
                                read_phi3_gguf};
  return a;
}

}  // namespace basalt
