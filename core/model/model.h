// SPDX-License-Identifier: MIT
// A loaded model: spec, weights in engine formats, tokenizer, chat template.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/gguf/gguf.h"
#include "core/model/hf_config.h"
#include "core/safetensors/safetensors.h"
#include "core/model/model_spec.h"
#include "core/tokenizer/tokenizer.h"
#include "quant/quantize_rtn.h"
#include "quant/weight.h"

namespace basalt {

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;
  std::vector<float> bq, bk, bv;  // empty without attention biases
  std::vector<float> q_norm, k_norm, attn_post_norm, ffn_post_norm;  // empty where the architecture has none
  Weight wq, wk, wv, wo;
  Weight w_gate, w_up, w_down;    // dense FFN
  Weight router;                  // MoE: [n_expert][n_embd]
  Weight gate_exps, up_exps;      // MoE: experts' rows stacked, [n_expert * n_ff][n_embd]
  Weight down_exps;               //      [n_expert * n_embd][n_ff]
};

// "[2048, 32000]": a tensor shape in the loaders' messages.
std::string shape_string(const std::vector<int64_t>& dims);
// "blk.0.attn_qkv.weight[0:3072]": the weight a loader made of rows [first, first + count) of a
// tensor that holds several layers (Phi-3's fused ones).
std::string rows_name(const std::string& tensor, int64_t first, int64_t count);

struct LoadOptions {
  // Dense (F32/F16/BF16) weights quantized at load with round-to-nearest:
  // q8_0 everywhere, or q4_0 with the token embedding and output layer in
  // q8_0 (the layers most sensitive to it). The MoE router stays dense.
  std::optional<RtnType> quantize;
  // Streaming attention for a model without a sliding window (StreamingLLM,
  // Xiao et al., 2023): every layer sees the first attention_sinks positions
  // and the last `window` (0: off). An approximation that keeps memory and
  // speed flat past the window; its perplexity cost is in docs/PERFORMANCE.md.
  int64_t attention_sinks = 0, window = 0;
};

class Model {
 public:
  // A GGUF file, or an HF model folder (config.json, safetensors, tokenizer.json):
  // parses, validates every tensor's shape against the spec, converts weights.
  static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options = {});

  const ModelSpec& spec() const { return spec_; }
  const std::string& source() const { return source_; }  // e.g. "m.gguf (GGUF v3)"
  const std::map<std::string, int>& file_types() const { return file_types_; }  // tensor type -> count, as stored
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::string& chat_template() const { return chat_template_; }  // "" if the file has none
  const GenerationDefaults& generation_defaults() const { return generation_defaults_; }  // HF folders

  const Weight& token_embd() const { return token_embd_; }
  const Weight& output() const { return spec_.tied_output ? token_embd_ : output_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  const LayerWeights& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }
  // For the quantizer, which swaps a block's weights in place between its
  // calibration passes (graphs point at them, so they keep their addresses).
  LayerWeights& layer_for_update(int64_t i) { return layers_[static_cast<size_t>(i)]; }

  int64_t n_params() const { return n_params_; }  // from the file's tensor shapes
  size_t weight_bytes() const;  // engine-format bytes resident in memory
  std::vector<const Weight*> weights() const;

 private:
  friend std::unique_ptr<Model> load_gguf_model(const std::string& path);  // core/model/load_gguf.cpp
  friend std::unique_ptr<Model> load_hf_model(const std::string& dir);     // core/model/load_hf.cpp
  Model() = default;
  void quantize_dense(RtnType type);
  ModelSpec spec_;
  std::string source_;
  std::map<std::string, int> file_types_;
  int64_t n_params_ = 0;
  std::optional<GgufFile> gguf_;              // the mappings weights borrow from
  std::optional<SafetensorsSet> safetensors_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string chat_template_;
  GenerationDefaults generation_defaults_;
  Weight token_embd_, output_;
  std::vector<float> output_norm_;
  std::vector<LayerWeights> layers_;
};

}  // namespace basalt
