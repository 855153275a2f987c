// SPDX-License-Identifier: MIT
// Gemma 3 (text): Gemma's graph (core/models/blocks.h) with RMS norms on each
// head's Q and K before RoPE; local layers (a sliding window, RoPE base
// rope_theta_swa) interleaved with a global one every swa_period layers. As
// llama.cpp reads its GGUF files: the converter stored every norm weight as
// 1 + w, so the norms are plain RMS norms here; HF folders store the w alone
// (hf_norm_offset). Gemma3ForConditionalGeneration (4B and up) is read for
// its text model only.
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/model/hf_config.h"
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
    "blk.{i}.post_attention_norm", "blk.{i}.post_ffw_norm",
    "", ""};
  return names;
}

// HF's post_attention_layernorm is Gemma's norm of the attention's output
// (Llama's FFN input norm has that name); pre_feedforward_layernorm the FFN's input's.
const TensorNames& gemma3_hf_names() {
  static const TensorNames names = {
    "model.embed_tokens", "model.norm", "lm_head",
    "model.layers.{i}.input_layernorm", "model.layers.{i}.pre_feedforward_layernorm",
    "model.layers.{i}.self_attn.q_proj", "model.layers.{i}.self_attn.k_proj",
    "model.layers.{i}.self_attn.v_proj", "model.layers.{i}.self_attn.o_proj",
    "model.layers.{i}.mlp.gate_proj", "model.layers.{i}.mlp.up_proj", "model.layers.{i}.mlp.down_proj",
    "", "", "", "",
    "model.layers.{i}.self_attn.q_norm", "model.layers.{i}.self_attn.k_norm",
    "model.layers.{i}.post_attention_layernorm", "model.layers.{i}.post_feedforward_layernorm",
    "", ""};
  return names;
}

// What Gemma 2's and 3's config.json say alike: the FFN's GELU (the tanh
// form is the engine's), the queries' scale (query_pre_attn_scalar^-1/2)
// and the soft-capping of scores and logits (null: none).
void read_gemma_hf(const HfConfig& c, ModelSpec& s) {
  const std::string act = c.get_string("hidden_activation", c.get_string("hidden_act", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    throw Error(c.where() + ": hidden_activation " + act + " is not supported (supported: gelu_pytorch_tanh)");
  const double scalar = c.get_float("query_pre_attn_scalar", static_cast<double>(s.head_dim));
  if (!(scalar > 0)) throw Error(c.where() + ": query_pre_attn_scalar must be positive");
  s.attn_scale = static_cast<float>(1.0 / std::sqrt(scalar));
  s.attn_softcap = static_cast<float>(c.get_float("attn_logit_softcapping", 0));
  s.final_softcap = static_cast<float>(c.get_float("final_logit_softcapping", 0));
  if (s.attn_softcap < 0 || s.final_softcap < 0) throw Error(c.where() + ": soft-capping values must be positive");
}

// The same keys written: query_pre_attn_scalar as the integer it was where it was one.
void write_gemma_hf(const ModelSpec& s, nlohmann::json& c) {
  c.erase("hidden_act");
  c["hidden_activation"] = "gelu_pytorch_tanh";
  const double q = 1.0 / (static_cast<double>(s.query_scale()) * static_cast<double>(s.query_scale()));
  if (std::abs(q - std::round(q)) < 1e-3) c["query_pre_attn_scalar"] = static_cast<int64_t>(std::round(q));
  else c["query_pre_attn_scalar"] = q;
  auto cap = [](float v) { return v > 0 ? nlohmann::json(static_cast<double>(v)) : nlohmann::json(nullptr); };
  c["attn_logit_softcapping"] = cap(s.attn_softcap);
  c["final_logit_softcapping"] = cap(s.final_softcap);
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

void read_gemma3_hf(const HfConfig& c, ModelSpec& s) {
  read_gemma_hf(c, s);
  // transformers 5 names it in rope_parameters instead (read with the common keys), older ones here.
  if (c.has("rope_local_base_freq") || s.rope_theta_swa <= 0)
    s.rope_theta_swa = static_cast<float>(c.get_float("rope_local_base_freq", 10000.0));
  if (c.get_bool("use_bidirectional_attention", false))
    throw Error(c.where() + ": use_bidirectional_attention (an embedding model) is not supported: basalt runs causal models");
}

// Both forms of the pattern: transformers before 4.53 reads sliding_window_pattern only.
void write_gemma3_hf(const ModelSpec& s, nlohmann::json& c) {
  write_gemma_hf(s, c);
  c["rope_local_base_freq"] = static_cast<double>(s.rope_theta_swa > 0 ? s.rope_theta_swa : s.rope_theta);
  c["sliding_window_pattern"] = s.swa_period;
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < s.n_layer; ++i) types.push_back(s.layer_windowed(i) ? "sliding_attention" : "full_attention");
  c["layer_types"] = types;
}

// transformers' Gemma3TextConfig defaults: the multimodal configs' text_config
// names only what differs from them.
constexpr const char* kGemma3TextDefaults = R"({"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
  "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
  "rope_theta": 1000000.0, "query_pre_attn_scalar": 256, "sliding_window": 4096,
  "final_logit_softcapping": null, "attn_logit_softcapping": null, "tie_word_embeddings": true})";

}  // namespace

const ArchDescriptor& gemma3_arch() {
  static const ArchDescriptor a{
      "gemma3",
      {{.name = "Gemma3ForCausalLM", .model_type = "gemma3_text", .defaults = kGemma3TextDefaults},
       {.name = "Gemma3ForConditionalGeneration", .model_type = "gemma3", .defaults = kGemma3TextDefaults,
        .text_config = "text_config"}},
      RopeStyle::neox,
      /*attn_bias=*/false,
      /*hf_sliding_window=*/true,
      /*hf_swa_period=*/6,
      gemma3_gguf_names(),
      gemma3_hf_names(),
      build_gemma_graph,
      read_gemma3_gguf,
      read_gemma3_hf,
      write_gemma3_hf,
      /*hf_norm_offset=*/1.0f};
  return a;
}

}  // namespace basalt
