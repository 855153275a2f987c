// SPDX-License-Identifier: MIT
// Qwen3 and Qwen3-MoE: the llama graph with an RMS norm on each head's Q and
// K before RoPE, no biases, the NeoX RoPE pairing, head_dim apart from
// n_embd / n_head. The MoE (Qwen3-30B-A3B, 235B-A22B) has experts in every
// block, routed as Mixtral's (softmax, top k, renormalized: norm_topk_prob),
// each expert its own FFN width (moe_intermediate_size, GGUF
// expert_feed_forward_length), no shared expert.
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/model/hf_config.h"
#include "core/models/arch.h"
#include "core/models/blocks.h"

namespace basalt {

const TensorNames& llama_gguf_names();  // core/models/llama.cpp: Qwen3 adds the Q/K norms
const TensorNames& llama_hf_names();

namespace {

TensorNames with_qk_norms(TensorNames n, const char* q_norm, const char* k_norm) {
  n.q_norm = q_norm, n.k_norm = k_norm;
  return n;
}

const TensorNames& qwen3_gguf_names() {
  static const TensorNames names = with_qk_norms(llama_gguf_names(), "blk.{i}.attn_q_norm", "blk.{i}.attn_k_norm");
  return names;
}

const TensorNames& qwen3_hf_names() {
  static const TensorNames names =
      with_qk_norms(llama_hf_names(), "model.layers.{i}.self_attn.q_norm", "model.layers.{i}.self_attn.k_norm");
  return names;
}

// The experts as the Hub's checkpoints store them: one tensor per expert under mlp.
const TensorNames& qwen3moe_hf_names() {
  static const TensorNames names = [] {
    TensorNames n = qwen3_hf_names();
    n.router = "model.layers.{i}.mlp.gate";
    n.gate_exps = "model.layers.{i}.mlp.experts.{e}.gate_proj";
    n.up_exps = "model.layers.{i}.mlp.experts.{e}.up_proj";
    n.down_exps = "model.layers.{i}.mlp.experts.{e}.down_proj";
    return n;
  }();
  return names;
}

// feed_forward_length is the dense FFN's width, which no block has.
void read_qwen3moe_gguf(const GgufFile& f, ModelSpec& s) {
  if (auto n = f.get_int("qwen3moe.expert_feed_forward_length")) s.n_ff = *n;
}

void read_qwen3moe_hf(const HfConfig& c, ModelSpec& s) {
  s.n_ff = c.need_int("moe_intermediate_size");
  if (!c.get_bool("norm_topk_prob", false))
    throw Error(c.where() + ": norm_topk_prob false is not supported (the chosen experts' weights are renormalized)");
  if (c.get_int("decoder_sparse_step", 1) != 1)
    throw Error(c.where() + ": decoder_sparse_step other than 1 is not supported (every block has experts)");
  if (c.list_size("mlp_only_layers") > 0)
    throw Error(c.where() + ": mlp_only_layers is not supported (every block has experts)");
}

void write_qwen3moe_hf(const ModelSpec& s, nlohmann::json& c) {
  c.erase("num_local_experts");
  c["num_experts"] = s.n_expert;
  c["moe_intermediate_size"] = s.n_ff;
  c["norm_topk_prob"] = true;
  c["decoder_sparse_step"] = 1;
  c["mlp_only_layers"] = nlohmann::json::array();
}

}  // namespace

const ArchDescriptor& qwen3_arch() {
  static const ArchDescriptor a{"qwen3",
                                {{"Qwen3ForCausalLM", "qwen3"}},
                                RopeStyle::neox,
                                /*attn_bias=*/false,
                                /*hf_sliding_window=*/false,
                                /*hf_swa_period=*/0,
                                qwen3_gguf_names(),
                                qwen3_hf_names(),
                                build_llama_graph};
  return a;
}

const ArchDescriptor& qwen3moe_arch() {
  static const ArchDescriptor a{"qwen3moe",
                                {{"Qwen3MoeForCausalLM", "qwen3_moe", /*moe=*/true}},
                                RopeStyle::neox,
                                /*attn_bias=*/false,
                                /*hf_sliding_window=*/false,
                                /*hf_swa_period=*/0,
                                qwen3_gguf_names(),
                                qwen3moe_hf_names(),
                                build_llama_graph,
                                read_qwen3moe_gguf,
                                read_qwen3moe_hf,
                                write_qwen3moe_hf};
  return a;
}

}  // namespace basalt
