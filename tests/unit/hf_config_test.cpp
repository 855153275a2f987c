// SPDX-License-Identifier: MIT
// config.json -> ModelSpec: the supported classes read right, and every
// missing, mistyped, unsupported or inconsistent field is an Error naming it;
// a folder whose tensors or files do not fit its config says which.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/graph/op_params.h"
#include "core/model/hf_config.h"
#include "core/model/model.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

nlohmann::json llama() {
  return nlohmann::json::parse(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "hidden_size": 2048,
    "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4, "intermediate_size": 5632,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false})");
}

std::string error_of(const std::string& text) {
  try {
    spec_from_hf_config_text(text, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfConfig, ReadsLlama) {
  const ModelSpec s = spec_from_hf_config_text(llama().dump(), "config.json");
  EXPECT_EQ(s.arch, "llama");
  EXPECT_EQ(s.n_embd, 2048);
  EXPECT_EQ(s.n_head_kv, 4);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.n_ff, 5632);
  EXPECT_EQ(s.rope_style, RopeStyle::neox);  // HF keeps Q/K in rotate-half order
  EXPECT_FALSE(s.attn_bias);
  EXPECT_FALSE(s.tied_output);
  EXPECT_EQ(s.sliding_window, 0);
}

TEST(HfConfig, ReadsQwen2MixtralMistral) {
  auto q = llama();
  q["architectures"] = {"Qwen2ForCausalLM"};
  q["sliding_window"] = 1024;
  q["use_sliding_window"] = false;
  q["tie_word_embeddings"] = true;
  const ModelSpec qs = spec_from_hf_config_text(q.dump(), "config.json");
  EXPECT_EQ(qs.arch, "qwen2");
  EXPECT_TRUE(qs.attn_bias);
  EXPECT_TRUE(qs.tied_output);
  EXPECT_EQ(qs.sliding_window, 0);  // switched off

  auto m = llama();
  m["architectures"] = {"MixtralForCausalLM"};
  m["num_local_experts"] = 8;
  m["num_experts_per_tok"] = 2;
  m["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  const ModelSpec ms = spec_from_hf_config_text(m.dump(), "config.json");
  EXPECT_EQ(ms.n_expert, 8);
  EXPECT_EQ(ms.n_expert_used, 2);
  EXPECT_FLOAT_EQ(ms.rope_freq_scale, 0.25f);

  auto w = llama();
  w["architectures"] = {"MistralForCausalLM"};
  w["sliding_window"] = 1024;
  EXPECT_EQ(spec_from_hf_config_text(w.dump(), "config.json").sliding_window, 1024);
}

// Qwen3: no biases, head_dim its own; Qwen3-MoE: its experts' keys, and what
// the engine cannot run (unnormalized routing, dense blocks among the MoE ones) named.
TEST(HfConfig, ReadsQwen3AndQwen3Moe) {
  auto q = llama();
  q["architectures"] = {"Qwen3ForCausalLM"};
  q["head_dim"] = 128;
  q["sliding_window"] = nullptr;
  q["use_sliding_window"] = false;
  q["max_window_layers"] = 22;
  const ModelSpec qs = spec_from_hf_config_text(q.dump(), "config.json");
  EXPECT_EQ(qs.arch, "qwen3");
  EXPECT_FALSE(qs.attn_bias);
  EXPECT_EQ(qs.head_dim, 128);
  EXPECT_EQ(qs.q_dim(), 32 * 128);
  EXPECT_EQ(qs.rope_style, RopeStyle::neox);
  EXPECT_EQ(qs.sliding_window, 0);

  auto m = q;
  m["architectures"] = {"Qwen3MoeForCausalLM"};
  m["intermediate_size"] = 6144;  // a dense FFN's width, which no block has
  m["moe_intermediate_size"] = 768;
  m["num_experts"] = 128;
  m["num_experts_per_tok"] = 8;
  m["norm_topk_prob"] = true;
  m["decoder_sparse_step"] = 1;
  m["mlp_only_layers"] = nlohmann::json::array();
  const ModelSpec ms = spec_from_hf_config_text(m.dump(), "config.json");
  EXPECT_EQ(ms.arch, "qwen3moe");
  EXPECT_EQ(ms.n_expert, 128);
  EXPECT_EQ(ms.n_expert_used, 8);
  EXPECT_EQ(ms.n_ff, 768);

  const std::pair<const char*, nlohmann::json> refused[] = {
      {"norm_topk_prob", false}, {"decoder_sparse_step", 2}, {"mlp_only_layers", {0, 5}}, {"mlp_only_layers", 3}};
  for (const auto& [key, value] : refused) {
    auto bad = m;
    bad[key] = value;
    const std::string err = error_of(bad.dump());
    EXPECT_NE(err.find(key), std::string::npos) << key << ": got \"" << err << "\"";
  }
  m.erase("moe_intermediate_size");
  EXPECT_NE(error_of(m.dump()).find("moe_intermediate_size is missing"), std::string::npos);
}

// Which layers take the window: layer_types, Qwen2's max_window_layers,
// sliding_window_pattern; a pattern the engine cannot hold is an Error.
TEST(HfConfig, ReadsWhichLayersAreWindowed) {
  auto spec = [](nlohmann::json j) { return spec_from_hf_config_text(j.dump(), "config.json"); };
  auto m = llama();  // 22 layers, context 2048
  m["architectures"] = {"MistralForCausalLM"};
  m["sliding_window"] = 512;
  std::vector<std::string> types(22, "sliding_attention");
  m["layer_types"] = types;
  EXPECT_EQ(spec(m).sliding_window, 512);
  EXPECT_EQ(spec(m).swa_period, 0);  // every layer
  for (size_t i = 5; i < types.size(); i += 6) types[i] = "full_attention";  // Gemma's 5 local : 1 global
  m["layer_types"] = types;
  EXPECT_EQ(spec(m).swa_period, 6);
  EXPECT_FALSE(spec(m).layer_windowed(5));
  EXPECT_TRUE(spec(m).layer_windowed(6));
  m["layer_types"] = std::vector<std::string>(22, "full_attention");
  EXPECT_EQ(spec(m).sliding_window, 0);
  m.erase("layer_types");
  m["sliding_window_pattern"] = 4;
  EXPECT_EQ(spec(m).swa_period, 4);

  auto q = llama();
  q["architectures"] = {"Qwen2ForCausalLM"};
  q["sliding_window"] = 512, q["use_sliding_window"] = true;
  q["max_window_layers"] = 22;  // Qwen2's usual: the window from layer 22 on, that is on none
  EXPECT_EQ(spec(q).sliding_window, 0);
  q["max_window_layers"] = 0;
  EXPECT_EQ(spec(q).sliding_window, 512);
  EXPECT_EQ(spec(q).swa_period, 0);
  q["max_window_layers"] = 20;  // the last two only: not a pattern the engine holds
  EXPECT_NE(error_of(q.dump()).find("pattern of sliding-window layers is not supported"), std::string::npos);
  m["layer_types"] = std::vector<std::string>(21, "full_attention");
  EXPECT_NE(error_of(m.dump()).find("list of 22 layer types"), std::string::npos);
  types[0] = "chunked_attention";
  m["layer_types"] = types;
  EXPECT_NE(error_of(m.dump()).find("layer_types[0] is chunked_attention"), std::string::npos);
}

// Gemma 3 as its text-only checkpoints (270M, 1B) write config.json: local
// layers with their own RoPE base, the queries' scale from
// query_pre_attn_scalar, no soft-capping (null), the pattern by layer_types.
TEST(HfConfig, ReadsGemma3) {
  auto j = nlohmann::json::parse(R"({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
    "vocab_size": 262144, "hidden_size": 640, "intermediate_size": 2048, "num_hidden_layers": 18,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 32768, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0,
    "rope_scaling": null, "rope_theta": 1000000.0, "sliding_window": 512, "_sliding_window_pattern": 6,
    "final_logit_softcapping": null, "attn_logit_softcapping": null, "use_bidirectional_attention": false})");
  std::vector<std::string> types(18, "sliding_attention");
  for (size_t i = 5; i < types.size(); i += 6) types[i] = "full_attention";
  j["layer_types"] = types;
  for (bool by_pattern : {false, true}) {
    if (by_pattern) j.erase("layer_types");  // older files: _sliding_window_pattern (or nothing: 6)
    const ModelSpec s = spec_from_hf_config_text(j.dump(), "config.json");
    EXPECT_EQ(s.arch, "gemma3");
    EXPECT_EQ(s.head_dim, 256);
    EXPECT_EQ(s.n_head_kv, 1);
    EXPECT_EQ(s.sliding_window, 512);
    EXPECT_EQ(s.swa_period, 6);
    EXPECT_FALSE(s.layer_windowed(5));
    EXPECT_TRUE(s.layer_windowed(6));
    EXPECT_FLOAT_EQ(s.rope_theta, 1e6f);
    EXPECT_FLOAT_EQ(s.rope_theta_swa, 1e4f);
    EXPECT_FLOAT_EQ(s.query_scale(), 1.0f / 16);
    EXPECT_EQ(s.attn_softcap, 0);
    EXPECT_EQ(s.final_softcap, 0);
    EXPECT_EQ(s.rope_style, RopeStyle::neox);
  }
  j["query_pre_attn_scalar"] = 168;  // the 27B's n_embd / n_head
  EXPECT_FLOAT_EQ(spec_from_hf_config_text(j.dump(), "config.json").query_scale(), 1.0f / std::sqrt(168.0f));
  j["hidden_activation"] = "gelu";
  EXPECT_NE(error_of(j.dump()).find("hidden_activation gelu is not supported"), std::string::npos);
  j["hidden_activation"] = "gelu_pytorch_tanh", j["use_bidirectional_attention"] = true;  // EmbeddingGemma
  EXPECT_NE(error_of(j.dump()).find("use_bidirectional_attention"), std::string::npos);
}

// The multimodal Gemma 3 (4B and up): the text model's config is text_config,
// which names only what differs from transformers' Gemma3TextConfig (here:
// gemma-3-4b-it's), and its rope_scaling is the global layers' only.
TEST(HfConfig, ReadsGemma3TextConfigOverItsDefaults) {
  auto j = nlohmann::json::parse(R"({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34,
                    "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
    "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"}, "mm_tokens_per_image": 256})");
  const ModelSpec s = spec_from_hf_config_text(j.dump(), "config.json");
  EXPECT_EQ(s.arch, "gemma3");
  EXPECT_EQ(s.n_embd, 2560);
  EXPECT_EQ(s.n_layer, 34);
  EXPECT_EQ(s.n_head, 8);
  EXPECT_EQ(s.n_head_kv, 4);
  EXPECT_EQ(s.head_dim, 256);
  EXPECT_EQ(s.n_vocab, 262208);
  EXPECT_EQ(s.n_ctx_train, 131072);
  EXPECT_EQ(s.sliding_window, 1024);
  EXPECT_EQ(s.swa_period, 6);
  EXPECT_FLOAT_EQ(s.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(s.rope_freq_scale, 0.125f);
  EXPECT_FLOAT_EQ(s.rope_theta_swa, 1e4f);
  EXPECT_FLOAT_EQ(s.rms_eps, 1e-6f);
  j.erase("text_config");
  EXPECT_NE(error_of(j.dump()).find("Gemma3ForConditionalGeneration needs a text_config object"), std::string::npos);
  j["text_config"] = {{"hidden_size", "wide"}};
  EXPECT_NE(error_of(j.dump()).find("config.json: text_config: hidden_size must be an integer"), std::string::npos);
}

// Gemma 2: every other layer local without a pattern key, and soft-capping
// (transformers' 50 and 30 where the file says nothing, none where it says null).
TEST(HfConfig, ReadsGemma2) {
  auto j = nlohmann::json::parse(R"({"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
    "vocab_size": 256000, "hidden_size": 4608, "intermediate_size": 36864, "num_hidden_layers": 46,
    "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128, "query_pre_attn_scalar": 144,
    "max_position_embeddings": 8192, "sliding_window": 4096, "hidden_act": "gelu_pytorch_tanh"})");
  const ModelSpec s = spec_from_hf_config_text(j.dump(), "config.json");
  EXPECT_EQ(s.arch, "gemma2");
  EXPECT_EQ(s.sliding_window, 4096);
  EXPECT_EQ(s.swa_period, 2);
  EXPECT_TRUE(s.layer_windowed(0));
  EXPECT_FALSE(s.layer_windowed(1));
  EXPECT_FLOAT_EQ(s.attn_softcap, 50);
  EXPECT_FLOAT_EQ(s.final_softcap, 30);
  EXPECT_FLOAT_EQ(s.query_scale(), 1.0f / 12);
  EXPECT_FLOAT_EQ(s.rope_theta, 1e4f);
  j["attn_logit_softcapping"] = nullptr, j["final_logit_softcapping"] = nullptr;
  const ModelSpec none = spec_from_hf_config_text(j.dump(), "config.json");
  EXPECT_EQ(none.attn_softcap, 0);
  EXPECT_EQ(none.final_softcap, 0);
}

// transformers 5 writes rope_parameters in place of rope_theta and
// rope_scaling (these objects are what its save_pretrained wrote): one object,
// or one per layer type with Gemma 3's two bases.
TEST(HfConfig, ReadsRopeParameters) {
  auto j = llama();
  j.erase("rope_theta");
  j["rope_parameters"] = nlohmann::json::parse(R"({"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192, "rope_theta": 500000.0, "rope_type": "llama3"})");
  j["max_position_embeddings"] = 131072;
  const ModelSpec l = spec_from_hf_config_text(j.dump(), "config.json");
  EXPECT_FLOAT_EQ(l.rope_theta, 500000.0f);
  ASSERT_EQ(l.rope_freq_factors.size(), 32u);
  EXPECT_FLOAT_EQ(l.rope_freq_factors.back(), 8.0f);
  EXPECT_FLOAT_EQ(l.rope_freq_factors.front(), 1.0f);
  j["rope_parameters"] = nlohmann::json::parse(R"({"factor": 4.0, "original_max_position_embeddings": 32768,
    "rope_theta": 1000000.0, "rope_type": "yarn"})");
  const ModelSpec y = spec_from_hf_config_text(j.dump(), "config.json");
  EXPECT_FLOAT_EQ(y.rope_theta, 1e6f);
  EXPECT_EQ(y.yarn_orig_ctx, 32768);
  EXPECT_FLOAT_EQ(y.rope_freq_scale, 0.25f);
  j["rope_parameters"] = {{"rope_theta", 250000.0}, {"rope_type", "default"}};
  EXPECT_FLOAT_EQ(spec_from_hf_config_text(j.dump(), "config.json").rope_theta, 250000.0f);

  // Gemma 3 (4B and up): the global layers' base scaled, the local layers' own.
  auto g = nlohmann::json::parse(R"({"architectures": ["Gemma3ForCausalLM"], "hidden_size": 2560, "intermediate_size": 10240,
    "num_hidden_layers": 34, "sliding_window": 1024, "rope_parameters": {
      "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})");
  const ModelSpec gs = spec_from_hf_config_text(g.dump(), "config.json");
  EXPECT_FLOAT_EQ(gs.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(gs.rope_freq_scale, 0.125f);
  EXPECT_FLOAT_EQ(gs.rope_theta_swa, 1e4f);
  g["rope_parameters"]["sliding_attention"]["rope_theta"] = 20000.0;
  EXPECT_FLOAT_EQ(spec_from_hf_config_text(g.dump(), "config.json").rope_theta_swa, 2e4f);
  g["rope_local_base_freq"] = 30000.0;  // both forms: the older key, written beside, wins
  EXPECT_FLOAT_EQ(spec_from_hf_config_text(g.dump(), "config.json").rope_theta_swa, 3e4f);

  // A local base of its own where the graph has none; scaled local layers; bad types.
  auto m = llama();
  m["architectures"] = {"MistralForCausalLM"};
  m["rope_parameters"] = {{"full_attention", {{"rope_theta", 1e6}}}, {"sliding_attention", {{"rope_theta", 1e4}}}};
  EXPECT_NE(error_of(m.dump()).find("local layers' own is not supported for llama"), std::string::npos) << error_of(m.dump());
  g["rope_parameters"]["sliding_attention"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  EXPECT_NE(error_of(g.dump()).find("rope_parameters.sliding_attention: rope_type linear is not supported"), std::string::npos);
  j["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  EXPECT_NE(error_of(j.dump()).find("config.json: rope_parameters: type \"dynamic\" is not supported"), std::string::npos)
      << error_of(j.dump());
  j["rope_parameters"] = "fast";
  EXPECT_NE(error_of(j.dump()).find("rope_parameters must be an object"), std::string::npos);
}

// YaRN's fields as config.json names them (Qwen2.5's long-context setting).
TEST(HfConfig, ReadsYarn) {
  auto j = llama();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}, {"beta_fast", 16}};
  const ModelSpec s = spec_from_hf_config_text(j.dump(), "config.json");
  EXPECT_FLOAT_EQ(s.rope_freq_scale, 0.25f);
  EXPECT_EQ(s.yarn_orig_ctx, 32768);
  EXPECT_FLOAT_EQ(s.yarn_beta_fast, 16);
  EXPECT_FLOAT_EQ(s.yarn_beta_slow, 1);
  EXPECT_FLOAT_EQ(s.rope_attn_factor, 1);
  // An explicit attention_factor replaces YaRN's default 1 + 0.1 ln(factor).
  j["rope_scaling"]["attention_factor"] = 1.5;
  const RopeParams p = make_rope(1, spec_from_hf_config_text(j.dump(), "config.json"), 10000.0f, 0.25f, true, 0);
  EXPECT_FLOAT_EQ(p.mscale, 1.5f);
}

// Llama 3.1's "llama3" scaling from config.json (made here, in C++) gives the
// per-pair factors llama.cpp's converter stores in a GGUF (made by
// make_model.py in numpy from transformers' definition).
TEST(HfConfig, Llama3ScalingEqualsTheGgufFactors) {
  const std::string dir = test::temp_dir("hf_llama3_rope");
  ASSERT_EQ(test::run_command(std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/make_model.py " +
                              dir + "/m.gguf --n-embd 64 --n-head 4 --rope-theta 500000 --rope-llama3 8:1:4:64"),
            0);
  const ModelSpec from_gguf = spec_from_gguf(GgufFile::open(dir + "/m.gguf"));
  auto j = llama();
  j["hidden_size"] = 64, j["num_attention_heads"] = 4, j["num_key_value_heads"] = 4, j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 64}};
  const ModelSpec from_hf = spec_from_hf_config_text(j.dump(), "config.json");
  ASSERT_EQ(from_gguf.rope_freq_factors.size(), 8u);
  ASSERT_EQ(from_hf.rope_freq_factors.size(), 8u);
  int kept = 0, divided = 0;
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_NEAR(from_hf.rope_freq_factors[i], from_gguf.rope_freq_factors[i], 1e-6 * from_gguf.rope_freq_factors[i]) << i;
    kept += from_hf.rope_freq_factors[i] == 1.0f, divided += from_hf.rope_freq_factors[i] == 8.0f;
  }
  EXPECT_GT(kept, 0);  // the shape covers all three kinds of pair
  EXPECT_GT(divided, 0);
  EXPECT_LT(kept + divided, 8);
}

TEST(HfConfig, BadConfigsAreErrors) {
  auto with = [](const char* key, nlohmann::json v) {
    auto j = llama();
    j[key] = v;
    return j.dump();
  };
  auto without = [](const char* key) {
    auto j = llama();
    j.erase(key);
    return j.dump();
  };
  const std::pair<std::string, std::string> cases[] = {
      {"{", "not valid JSON"},
      {"[]", "not a JSON object"},
      {without("architectures"), "no architectures"},
      {with("architectures", {"GPT2LMHeadModel"}), "GPT2LMHeadModel is not supported"},
      {without("hidden_size"), "hidden_size is missing"},
      {with("hidden_size", "2048"), "hidden_size must be an integer"},
      {with("num_key_value_heads", 5), "not a multiple"},
      {with("num_attention_heads", 0), "inconsistent"},
      {with("rms_norm_eps", "tiny"), "rms_norm_eps must be a number"},
      {with("tie_word_embeddings", 1), "must be true or false"},
      {with("rope_scaling", {{"rope_type", "dynamic"}, {"factor", 4}}), "not supported"},
      {with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 40}, {"mscale", 1}}), "DeepSeek"},
      {with("rope_scaling", {{"rope_type", "llama3"}, {"factor", 8}}), "llama3 needs"},
      {with("rope_scaling", {{"type", "linear"}, {"factor", -1}}), "positive"},
      {with("vocab_size", 0), "vocab_size"},
      {with("intermediate_size", -5), "inconsistent"},
      // the limits of docs/LIMITS.md
      {with("num_hidden_layers", 1025), "block_count 1025"},
      {with("hidden_size", 1 << 18), "embedding_length 262144"},
      {with("head_dim", 2048), "head dimension 2048"},
      {with("head_dim", 63), "head dimension 63"},
  };
  for (const auto& [text, message] : cases) {
    const std::string err = error_of(text);
    EXPECT_NE(err.find(message), std::string::npos) << text.substr(0, 80) << ": got \"" << err << "\"";
    EXPECT_NE(err.find("config.json"), std::string::npos) << "the message names the file: " << err;
  }
  auto moe = llama();
  moe["architectures"] = {"MixtralForCausalLM"};
  EXPECT_NE(error_of(moe.dump()).find("num_local_experts is missing"), std::string::npos);
  moe["num_local_experts"] = 513;
  moe["num_experts_per_tok"] = 2;
  EXPECT_NE(error_of(moe.dump()).find("of expert_count 513"), std::string::npos) << error_of(moe.dump());
}

// Phi-3.5-mini's config.json (its keys, shorter factor lists): LongRoPE's
// factors, the original context beside rope_scaling, the attention factor
// transformers derives from it; Phi-4-mini's partial rotary. The context a
// cache holds chooses the factors, and both sets take the attention factor.
TEST(HfConfig, ReadsPhi3LongRope) {
  auto j = nlohmann::json::parse(R"({"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 32064,
    "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 4, "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0, "rms_norm_eps": 1e-05, "sliding_window": 262144,
    "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.1,
      2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8, 2.9, 3.0, 3.1, 3.2, 3.3, 3.4, 3.5, 3.6, 3.7, 3.8, 3.9, 4.0, 4.1],
      "long_factor": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0,
      19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0]}})");
  const ModelSpec s = spec_from_hf_config_text(j.dump(), "config.json");
  EXPECT_EQ(s.arch, "phi3");
  EXPECT_EQ(s.rope_dim, 64);
  EXPECT_EQ(s.rope_long_context, 4096);
  EXPECT_EQ(s.sliding_window, 0);  // 262144: past the context
  ASSERT_EQ(s.rope_long_factors.size(), 32u);
  EXPECT_FLOAT_EQ(s.rope_freq_factors[1], 1.1f);
  EXPECT_FLOAT_EQ(s.rope_long_factors[1], 2.0f);
  const float attention = static_cast<float>(std::sqrt(1 + std::log(32.0) / std::log(4096.0)));  // 131072 / 4096
  EXPECT_FLOAT_EQ(s.rope_attn_factor, attention);
  const float base = static_cast<float>(std::pow(10000.0, -2.0 / 64));  // pair 1's unscaled frequency
  for (int64_t n_ctx : {4096, 4097}) {
    const RopeParams p = make_rope(4, s, 10000.0f, 1.0f, true, n_ctx);
    EXPECT_FLOAT_EQ(p.freqs[1], base / (n_ctx > 4096 ? 2.0f : 1.1f)) << n_ctx;
    EXPECT_FLOAT_EQ(p.mscale, attention) << n_ctx;
  }

  j["rope_scaling"]["attention_factor"] = 1.25;  // named: used as it is
  EXPECT_FLOAT_EQ(spec_from_hf_config_text(j.dump(), "config.json").rope_attn_factor, 1.25f);
  j["sliding_window"] = 2047;  // Phi-3-mini-4k's window, on every layer
  EXPECT_EQ(spec_from_hf_config_text(j.dump(), "config.json").sliding_window, 2047);

  // Phi-4-mini: 3/4 of each head turns, and the factor lists are that long.
  j["partial_rotary_factor"] = 0.75;
  EXPECT_NE(error_of(j.dump()).find("short_factor must be a list of 24 numbers"), std::string::npos) << error_of(j.dump());
  for (const char* key : {"short_factor", "long_factor"})
    while (j["rope_scaling"][key].size() > 24) j["rope_scaling"][key].erase(24);
  EXPECT_EQ(spec_from_hf_config_text(j.dump(), "config.json").rope_dim, 48);
  j["rope_scaling"]["long_factor"][3] = -1.0;
  EXPECT_NE(error_of(j.dump()).find("long_factor holds -1.0, not a positive number"), std::string::npos) << error_of(j.dump());
  j["partial_rotary_factor"] = 1.5;
  EXPECT_NE(error_of(j.dump()).find("partial_rotary_factor must be in (0, 1]"), std::string::npos) << error_of(j.dump());
}

}  // namespace
}  // namespace basalt

// Loading a whole folder: what is missing or does not fit is named.
namespace basalt {
namespace {

std::string load_error(const std::string& dir) {
  try {
    Model::load(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfFolder, MismatchesAreNamed) {
  const std::string dir = test::temp_dir("hf_folder");
  const std::string py = std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/";
  ASSERT_EQ(test::run_command(py + "make_model.py " + dir + "/m.gguf --type f16 > /dev/null"), 0);
  ASSERT_EQ(test::run_command(py + "make_hf_folder.py " + dir + "/m.gguf " + dir + "/hf"), 0);
  const std::string hf = dir + "/hf";
  EXPECT_EQ(load_error(hf), "");
  nlohmann::json config = nlohmann::json::parse(std::ifstream(hf + "/config.json"));
  const nlohmann::json good = config;
  config["intermediate_size"] = 96;
  std::ofstream(hf + "/config.json") << config.dump();
  EXPECT_NE(load_error(hf).find("model.layers.0.mlp.gate_proj.weight has shape [128, 64], expected [96, 64]"), std::string::npos)
      << load_error(hf);
  config = good;
  config["num_hidden_layers"] = 3;
  std::ofstream(hf + "/config.json") << config.dump();
  EXPECT_NE(load_error(hf).find("tensor model.layers.2.input_layernorm.weight is missing"), std::string::npos) << load_error(hf);
  std::ofstream(hf + "/config.json") << good.dump();
  std::filesystem::remove(hf + "/tokenizer.json");
  EXPECT_NE(load_error(hf).find("no tokenizer.json"), std::string::npos) << load_error(hf);
  std::filesystem::remove(hf + "/config.json");
  EXPECT_NE(load_error(hf).find("no config.json"), std::string::npos) << load_error(hf);
}

// Phi-3's fused layers: a qkv_proj or gate_up_proj of the wrong height is
// named whole, against the rows its parts need, dense or GPTQ.
TEST(HfFolder, Phi3FusedMismatchesAreNamed) {
  const std::string dir = test::temp_dir("hf_folder_phi3");
  const std::string py = std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/";
  ASSERT_EQ(test::run_command(py + "make_model.py " + dir + "/m.gguf --arch phi3 --type f16 > /dev/null"), 0);
  ASSERT_EQ(test::run_command(py + "make_hf_folder.py " + dir + "/m.gguf " + dir + "/hf"), 0);
  ASSERT_EQ(test::run_command(py + "make_gptq.py " + dir + "/hf " + dir + "/gptq --bits 4 --group-size 32"), 0);
  for (const std::string& folder : {dir + "/hf", dir + "/gptq"}) {
    EXPECT_EQ(load_error(folder), "") << folder;
    nlohmann::json config = nlohmann::json::parse(std::ifstream(folder + "/config.json"));
    const nlohmann::json good = config;
    config["num_key_value_heads"] = 4;  // Q, K, V need 64 + 64 + 64 rows; the tensor has 128
    std::ofstream(folder + "/config.json") << config.dump();
    const std::string err = load_error(folder);
    EXPECT_NE(err.find("model.layers.0.self_attn.qkv_proj"), std::string::npos) << err;
    EXPECT_TRUE(err.find("expected [192, 64]") != std::string::npos || err.find("expected 192 outputs") != std::string::npos)
        << err;
    config = good;
    config["intermediate_size"] = 96;  // gate_up needs 192 rows; it has 256
    std::ofstream(folder + "/config.json") << config.dump();
    EXPECT_NE(load_error(folder).find("model.layers.0.mlp.gate_up_proj"), std::string::npos) << load_error(folder);
  }
}

}  // namespace
}  // namespace basalt

namespace basalt {
namespace {

TEST(HfFolder, GenerationConfigGivesSamplingDefaults) {
  const std::string dir = test::temp_dir("hf_generation");
  const std::string py = std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/";
  ASSERT_EQ(test::run_command(py + "make_model.py " + dir + "/m.gguf --type f32 --vocab-size 300 > /dev/null"), 0);
  ASSERT_EQ(test::run_command(py + "make_hf_folder.py " + dir + "/m.gguf " + dir + "/hf"), 0);
  const std::string hf = dir + "/hf", basalt = std::string(BASALT_BIN_DIR) + "/basalt";
  auto run = [&](const std::string& args) {
    std::string out;
    test::run_command(basalt + " run -m " + hf + " -p hello -n 24 " + args + " 2>/dev/null", &out);
    return out;
  };
  // No defaults: seeds give different samples (temperature 0.8).
  EXPECT_NE(run("--seed 1"), run("--seed 2"));
  std::ofstream(hf + "/generation_config.json") << R"({"do_sample": false, "top_k": 7, "eos_token_id": 2})";
  EXPECT_EQ(read_generation_defaults(hf + "/generation_config.json").top_k, 7);
  EXPECT_EQ(run("--seed 1"), run("--seed 2"));                      // greedy, as the file asks
  EXPECT_NE(run("--seed 1 --temp 0.8"), run("--seed 2 --temp 0.8"));  // the user's --temp wins
  std::string info;
  test::run_command(basalt + " info " + hf, &info);
  EXPECT_NE(info.find("do_sample false top_k 7"), std::string::npos) << info;
  std::ofstream(hf + "/generation_config.json") << R"({"temperature": "hot"})";
  try {
    Model::load(hf);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("temperature must be a number"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace basalt
