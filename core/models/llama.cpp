// SPDX-License-Identifier: MIT
// The llama family: llama 2/3, SmolLM2, TinyLlama, Mistral (GGUF calls it
// "mistral" or "llama"; HF windows: ModelSpec::sliding_window) and
// Mixtral-style MoE (GGUF "llama" with expert tensors; HF MixtralForCausalLM).
#include "core/models/arch.h"
#include "core/models/blocks.h"

namespace basalt {

const TensorNames& llama_gguf_names() {
  static const TensorNames names = {
    "token_embd", "output_norm", "output",
    "blk.{i}.attn_norm", "blk.{i}.ffn_norm",
    "blk.{i}.attn_q", "blk.{i}.attn_k", "blk.{i}.attn_v", "blk.{i}.attn_output",
    "blk.{i}.ffn_gate", "blk.{i}.ffn_up", "blk.{i}.ffn_down",
    "blk.{i}.ffn_gate_inp", "blk.{i}.ffn_gate_exps", "blk.{i}.ffn_up_exps", "blk.{i}.ffn_down_exps",
    "", "", "", "",  // no Q/K or post norms
    "", ""};          // nor fused layers
  return names;
}

const TensorNames& llama_hf_names() {
  static const TensorNames names = {
    "model.embed_tokens", "model.norm", "lm_head",
    "model.layers.{i}.input_layernorm", "model.layers.{i}.post_attention_layernorm",
    "model.layers.{i}.self_attn.q_proj", "model.layers.{i}.self_attn.k_proj",
    "model.layers.{i}.self_attn.v_proj", "model.layers.{i}.self_attn.o_proj",
    "model.layers.{i}.mlp.gate_proj", "model.layers.{i}.mlp.up_proj", "model.layers.{i}.mlp.down_proj",
    "model.layers.{i}.block_sparse_moe.gate", "model.layers.{i}.block_sparse_moe.experts.{e}.w1",
    "model.layers.{i}.block_sparse_moe.experts.{e}.w3", "model.layers.{i}.block_sparse_moe.experts.{e}.w2",
    "", "", "", "", "", ""};
  return names;
}

// GGUF llama files were permuted by their converter to the interleaved RoPE pairing.
const ArchDescriptor& llama_arch() {
  static const ArchDescriptor a{"llama",
                                {{"LlamaForCausalLM", "llama"},
                                 {"MistralForCausalLM", "mistral", false, true},
                                 {"MixtralForCausalLM", "mixtral", true}},
                                RopeStyle::normal,
                                /*attn_bias=*/false,
                                /*hf_sliding_window=*/true,
                                /*hf_swa_period=*/0,
                                llama_gguf_names(),
                                llama_hf_names(),
                                build_llama_graph};
  return a;
}

const ArchDescriptor& mistral_arch() {
  static const ArchDescriptor a{"mistral",
                                {{"MistralForCausalLM", "mistral", false, true}, {"MistralForCausalLM", "mistral"}},
                                RopeStyle::normal, false, true, 0, llama_gguf_names(), llama_hf_names(),
                                build_llama_graph};
  return a;
}

}  // namespace basalt
