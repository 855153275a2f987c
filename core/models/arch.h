// SPDX-License-Identifier: MIT
// One model architecture, described in one place (core/models/<name>.cpp):
// its names in GGUF files and HF folders, what differs in its hyper-parameters,
// and its graph builder. The loaders read tensor names from it and the
// executor builds its graph through it. Adding an architecture is one such
// file (most of it shared helpers, core/models/blocks.h) and one line in the
// table of core/models/architectures.cpp.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/graph/graph.h"
#include "core/model/model_spec.h"

namespace basalt {

class GgufFile;
class HfConfig;
class Model;
struct LayerWeights;

// Where a model's tensors live in one file format, without the ".weight"
// (".bias", ".qweight", ...) suffix; "{i}" stands for the block, "{e}" for
// the expert. Empty: the format has no such tensor for this architecture.
struct TensorNames {
  std::string token_embd, output_norm, output;
  std::string attn_norm, ffn_norm;
  std::string q, k, v, o;                      // attention's linear layers (with .bias where attn_bias)
  std::string gate, up, down;                  // the dense FFN
  std::string router, gate_exps, up_exps, down_exps;  // MoE: GGUF stacks the experts, HF has one tensor per {e}
  std::string q_norm, k_norm;                  // per head, before RoPE (Gemma 3)
  std::string attn_post_norm, ffn_post_norm;   // on the blocks' outputs, before the residual add (Gemma 3)
  // Layers stored as one tensor (Phi-3): Q, K and V's rows, used where the
  // file has it (else q, k, v); the FFN's gate rows then up rows, always.
  std::string qkv, gate_up;
};

// A block's norm weights and where their names are: the loaders and the GPTQ
// writer walk this table (an architecture without one has its name empty).
struct LayerNorm {
  std::string TensorNames::*name;
  std::vector<float> LayerWeights::*weights;
  bool per_head;  // head_dim values (Gemma 3's Q/K norms), else n_embd
};
const std::vector<LayerNorm>& layer_norms();

// An HF config.json "architectures" class this architecture reads (and the
// GPTQ checkpoint writer writes: the first whose moe and sliding_window fit).
struct HfClass {
  const char* name;
  const char* model_type;       // config.json model_type
  bool moe = false;             // Mixtral: num_local_experts, num_experts_per_tok
  bool sliding_window = false;  // the class for a model with a window (Mistral v0.1)
  // transformers' defaults for the keys a config.json may leave out (a JSON
  // object; nullptr: none), and, for a multimodal class, the key its text
  // model's config is under (Gemma 3's text_config; the other towers are not read).
  const char* defaults = nullptr;
  const char* text_config = nullptr;
};

struct ArchDescriptor {
  const char* name;  // GGUF general.architecture, and ModelSpec::arch
  std::vector<HfClass> hf_classes;
  RopeStyle gguf_rope;        // GGUF files (HF checkpoints rotate halves: neox)
  bool attn_bias;             // Q, K, V biases
  bool hf_sliding_window;     // whether config.json's sliding_window applies unless use_sliding_window says no
  int64_t hf_swa_period;      // and on which layers, where it names none: all but every Nth (0: all)
  TensorNames gguf, hf;
  Graph (*build_graph)(const Model& m);
  // The GGUF metadata and config.json keys only this architecture has, read
  // after the common ones (nullptr: none).
  void (*read_gguf)(const GgufFile& f, ModelSpec& s) = nullptr;
  void (*read_hf)(const HfConfig& c, ModelSpec& s) = nullptr;
  // Those keys written back (quant/gptq/gptq_checkpoint.cpp), over the common ones.
  void (*write_hf)(const ModelSpec& s, nlohmann::json& config) = nullptr;
  // Added to the norm weights an HF folder stores: Gemma's norms scale by
  // 1 + w, which GGUF files (and the engine) hold as one weight.
  float hf_norm_offset = 0;
};

// The table; nullptr for an unknown name or class.
const std::vector<const ArchDescriptor*>& architectures();
const ArchDescriptor* find_arch(const std::string& gguf_name);
const ArchDescriptor* find_arch_for_hf_class(const std::string& hf_class, const HfClass** cls);
std::string supported_arch_names();       // "llama, mistral, qwen2"
std::string supported_hf_class_names();   // "LlamaForCausalLM, ..."

// pattern with {i} = layer and {e} = expert (a stacked tensor's name, e < 0:
// ".{e}" dropped), then suffix: tensor_name("blk.{i}.attn_q", 3, -1, ".weight").
std::string tensor_name(const std::string& pattern, int64_t layer, int64_t expert = -1, const std::string& suffix = "");

}  // namespace basalt
