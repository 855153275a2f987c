// SPDX-License-Identifier: MIT
#include "quant/gptq/gptq_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <list>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model/hf_config.h"
#include "core/models/arch.h"
#include "core/gguf/gguf.h"
#include "core/safetensors/safetensors_writer.h"
#include "core/tokenizer/tokenizer_gguf.h"
#include "core/tokenizer/tokenizer_hf.h"
#include "core/util/json_text.h"

namespace basalt {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

void write_json(const fs::path& p, const json& j) {
  std::ofstream f(p, std::ios::binary);
  f << j.dump(2) << "\n";
  if (!f.flush()) throw Error("cannot write " + p.string());
}

json quantization_config(const ModelQuantizeOptions& o, const CheckpointProvenance& prov) {
  return {{"quant_method", "gptq"},
          {"bits", o.layer.bits},
          {"group_size", o.layer.group_size},
          {"desc_act", o.layer.act_order},
          {"sym", o.layer.sym},
          {"damp_percent", o.layer.damp},
          {"true_sequential", false},  // a block's layers are quantized from one calibration pass
          {"static_groups", false},
          {"checkpoint_format", o.v2 ? "gptq_v2" : "gptq"},
          {"meta", {{"quantizer", {"basalt"}}, {"method", prov.method}, {"calibration", prov.calibration}}}};
}

// A float as the shortest decimal that reads back as it (1e-05, not 9.999999747378752e-06).
double short_decimal(float x) {
  for (int digits = 6; digits < 9; ++digits) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(x));
    if (static_cast<float>(std::strtod(buf, nullptr)) == x) return std::strtod(buf, nullptr);
  }
  return x;
}

// A JSON list of floats, each as its shortest decimal.
json decimals(const std::vector<float>& v) {
  json a = json::array();
  for (float x : v) a.push_back(short_decimal(x));
  return a;
}

// config.json's rope_scaling for the per-pair factors of a GGUF file, where
// llama.cpp's converter keeps only the factors (rope_freqs.weight): Llama
// 3.1's llama3 type if its parameters make them again, solved from the pairs
// between kept and divided (original context 8192, Llama 3.1's and 3.2's:
// only its ratios to the frequency factors matter, so theirs come back as 1
// and 4); else the same factors as a LongRoPE of one set, which transformers
// reads exactly.
json pair_factors_scaling(const ModelSpec& s) {
  const std::vector<float>& f = s.rope_freq_factors;
  const double factor = *std::max_element(f.begin(), f.end());
  // smooth = a / wavelength + b on the mixed pairs: a = original / (high - low), b = -low / (high - low)
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (!(f[i] > 1.0001 && f[i] < factor * 0.9999)) continue;
    const double x = std::pow(static_cast<double>(s.rope_theta), -2.0 * static_cast<double>(i) / static_cast<double>(s.rope_dim)) /
                     (2 * M_PI);
    const double y = (1 / f[i] - 1 / factor) / (1 - 1 / factor);
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  if (n >= 2 && factor > 1) {
    const double a = (n * sxy - sx * sy) / (n * sxx - sx * sx), b = (sy - a * sx) / n;
    const int64_t original = 8192;
    auto six_digits = [](double x) {  // Llama 3.1's 1 and 4 come back as 1 and 4, not 0.9999999
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", x);
      return std::strtod(buf, nullptr);
    };
    const double span = static_cast<double>(original) / a, low = six_digits(-b * span), high = six_digits(-b * span + span);
    if (low > 0 && high > low) {
      const std::vector<float> again = llama3_rope_factors(s, factor, low, high, static_cast<double>(original));
      bool same = true;
      for (size_t i = 0; i < f.size(); ++i) same = same && std::abs(again[i] - f[i]) <= 1e-5f * f[i];
      if (same)
        return {{"rope_type", "llama3"}, {"factor", short_decimal(static_cast<float>(factor))}, {"low_freq_factor", low},
                {"high_freq_factor", high}, {"original_max_position_embeddings", original}};
    }
  }
  return {{"rope_type", "longrope"}, {"short_factor", decimals(f)}, {"long_factor", decimals(f)},
          {"attention_factor", 1.0}, {"original_max_position_embeddings", s.n_ctx_train}};
}

// config.json for a model read from a GGUF file (the inverse of core/model/hf_config.cpp).
json config_from_spec(const ModelSpec& s, const Tokenizer& tok) {
  const ArchDescriptor* arch = find_arch(s.arch);
  const HfClass* hf = nullptr;  // the class that fits: MoE or not, and a window or not
  if (arch)
    for (const HfClass& c : arch->hf_classes) {
      if (c.moe != s.is_moe()) continue;
      if (c.sliding_window == (s.sliding_window > 0)) {
        hf = &c;
        break;
      }
      if (!hf) hf = &c;  // the first of the right kind, failing an exact fit
    }
  if (!hf)
    throw Error("quantize: architecture " + s.arch + (s.is_moe() ? " with experts" : "") + " has no HF config class here");
  const char* cls = hf->name;
  const char* type = hf->model_type;
  json c = {{"architectures", {cls}},
            {"model_type", type},
            {"vocab_size", s.n_vocab},
            {"hidden_size", s.n_embd},
            {"intermediate_size", s.n_ff},
            {"num_hidden_layers", s.n_layer},
            {"num_attention_heads", s.n_head},
            {"num_key_value_heads", s.n_head_kv},
            {"head_dim", s.head_dim},
            {"max_position_embeddings", s.n_ctx_train},
            {"rms_norm_eps", short_decimal(s.rms_eps)},
            {"rope_theta", short_decimal(s.rope_theta)},
            {"hidden_act", "silu"},
            {"tie_word_embeddings", s.tied_output},
            {"attention_bias", s.attn_bias},
            {"torch_dtype", "float16"}};
  if (s.rope_freq_scale != 1.0f) c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", short_decimal(1.0f / s.rope_freq_scale)}};
  if (s.yarn_orig_ctx > 0) {  // the inverse of read_rope_scaling's: its attention factor is rope_attn_factor's
    if (s.yarn_ext_factor != 1) throw Error("quantize: YaRN with an ext_factor other than 1 has no config.json form");
    const double factor = 1.0 / s.rope_freq_scale;
    c["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", short_decimal(static_cast<float>(factor))},
                         {"original_max_position_embeddings", s.yarn_orig_ctx},
                         {"beta_fast", short_decimal(s.yarn_beta_fast)},
                         {"beta_slow", short_decimal(s.yarn_beta_slow)}};
    if (s.rope_attn_factor != 1) c["rope_scaling"]["attention_factor"] = s.rope_attn_factor * (1 + 0.1 * std::log(factor));
  }
  if (!s.rope_freq_factors.empty() && s.rope_long_factors.empty()) c["rope_scaling"] = pair_factors_scaling(s);
  if (s.rope_dim != s.head_dim) c["partial_rotary_factor"] = static_cast<double>(s.rope_dim) / static_cast<double>(s.head_dim);
  if (!s.rope_long_factors.empty()) {  // LongRoPE, as Phi-3's configs write it
    c["original_max_position_embeddings"] = s.rope_long_context;
    c["rope_scaling"] = {{"type", "longrope"},
                         {"short_factor", decimals(s.rope_freq_factors)},
                         {"long_factor", decimals(s.rope_long_factors)},
                         {"attention_factor", short_decimal(s.rope_attn_factor)}};
  }
  if (s.sliding_window) c["sliding_window"] = s.sliding_window;
  if (!arch->hf_sliding_window) c["use_sliding_window"] = false;  // Qwen2 names a window it does not use
  if (s.is_moe()) c["num_local_experts"] = s.n_expert, c["num_experts_per_tok"] = s.n_expert_used;
  if (tok.bos_id() >= 0) c["bos_token_id"] = tok.bos_id();
  if (tok.eos_id() >= 0) c["eos_token_id"] = tok.eos_id();
  if (arch->write_hf) arch->write_hf(s, c);
  return c;
}

// HF row r of Q or K is row rows[r] of a GGUF llama file's (pairs interleaved per head).
std::vector<int32_t> rotate_half_rows(int64_t n_head, int64_t head_dim) {
  std::vector<int32_t> rows(static_cast<size_t>(n_head * head_dim));
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t i = 0; i < head_dim / 2; ++i)
        rows[static_cast<size_t>(h * head_dim + half * head_dim / 2 + i)] = static_cast<int32_t>(h * head_dim + 2 * i + half);
  return rows;
}

// Layers an architecture stores as one tensor: its name, and theirs in order.
struct Fused {
  std::string TensorNames::*name;
  std::vector<std::string TensorNames::*> parts;
};
const Fused kFused[] = {{&TensorNames::qkv, {&TensorNames::q, &TensorNames::k, &TensorNames::v}},
                        {&TensorNames::gate_up, {&TensorNames::gate, &TensorNames::up}}};

// Tensors to write, and the buffers they point into (kept until the file is written).
class TensorList {
 public:
  // A dense matrix: its own bytes for F32/F16/BF16, else decoded to F32.
  void matrix(const std::string& name, const Weight& w) {
    if (w.format == WeightFormat::f32 || w.format == WeightFormat::f16 || w.format == WeightFormat::bf16) {
      const StDtype t = w.format == WeightFormat::f32 ? StDtype::f32 : w.format == WeightFormat::f16 ? StDtype::f16 : StDtype::bf16;
      out_.push_back({name, t, {w.rows, w.cols}, w.data});
      return;
    }
    std::vector<float>& f = floats_.emplace_back(static_cast<size_t>(w.rows * w.cols));
    for (int64_t r = 0; r < w.rows; ++r) dequantize_row(w, r, f.data() + r * w.cols);
    out_.push_back({name, StDtype::f32, {w.rows, w.cols}, f.data()});
  }
  void vector(const std::string& name, const std::vector<float>& v, const std::vector<int32_t>& order = {}) {
    const std::vector<float>* src = &v;
    if (!order.empty()) {
      std::vector<float>& r = floats_.emplace_back(v.size());
      for (size_t i = 0; i < v.size(); ++i) r[i] = v[static_cast<size_t>(order[i])];
      src = &r;
    }
    out_.push_back({name, StDtype::f32, {static_cast<int64_t>(src->size())}, src->data()});
  }
  // A norm's weights as the HF folder stores them (Gemma's: w for the engine's 1 + w).
  void norm(const std::string& name, const std::vector<float>& v, float hf_offset) {
    if (hf_offset == 0) return vector(name, v);
    std::vector<float>& r = floats_.emplace_back(v);
    for (float& x : r) x -= hf_offset;
    vector(name, r);
  }
  void gptq(const std::string& prefix, GptqPacked&& p) { gptq(prefix, packed_.emplace_back(std::move(p))); }
  void gptq(const std::string& prefix, const GptqPacked& p, const std::vector<int32_t>& order = {}) {
    const GptqPacked& kept = order.empty() ? p : packed_.emplace_back(gptq_reorder_outputs(p, order));
    for (StTensorOut& t : gptq_tensors_out(kept, prefix)) out_.push_back(std::move(t));
  }
  const std::vector<StTensorOut>& tensors() const { return out_; }

 private:
  std::vector<StTensorOut> out_;
  std::list<std::vector<float>> floats_;  // lists: elements never move
  std::list<GptqPacked> packed_;
};

}  // namespace

void write_gptq_checkpoint(const Model& model, const std::string& source, const std::vector<std::vector<QuantizedLinear>>& layers,
                           const ModelQuantizeOptions& o, const CheckpointProvenance& provenance, const std::string& dir) {
  const ModelSpec& s = model.spec();
  const fs::path out(dir), partial(dir + ".partial"), in(source);
  std::error_code ec;
  if (fs::exists(out, ec)) throw Error(dir + " exists already: give a new folder (nothing is overwritten)");
  const bool from_hf = fs::is_directory(in, ec);
  if (!from_hf && s.rope_style == RopeStyle::normal && s.rope_dim != s.head_dim)
    throw Error("quantize: partial RoPE with interleaved pairs has no HF form here");
  if (static_cast<int64_t>(layers.size()) != s.n_layer) throw Error("internal: quantized layers missing");

  // Tensor names from the architecture's descriptor (core/models/<arch>.cpp), as the loader reads them.
  const ArchDescriptor& arch = *find_arch(s.arch);
  const TensorNames& n = arch.hf;
  auto name = [](const std::string& pattern, int64_t i, const char* suffix) { return tensor_name(pattern, i, -1, suffix); };
  TensorList t;
  t.matrix(name(n.token_embd, -1, ".weight"), model.token_embd());
  t.norm(name(n.output_norm, -1, ".weight"), model.output_norm(), arch.hf_norm_offset);
  if (!s.tied_output) t.matrix(name(n.output, -1, ".weight"), model.output());
  // GGUF llama Q/K rows back in the rotate-half order (HF folders and qwen2 files have it already).
  const bool reorder = !from_hf && s.rope_style == RopeStyle::normal;
  const std::vector<int32_t> q_rows = reorder ? rotate_half_rows(s.n_head, s.head_dim) : std::vector<int32_t>{};
  const std::vector<int32_t> k_rows = reorder ? rotate_half_rows(s.n_head_kv, s.head_dim) : std::vector<int32_t>{};
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const LayerWeights& l = model.layer(i);
    for (const LayerNorm& norm : layer_norms())
      if (!(l.*norm.weights).empty()) t.norm(name(n.*norm.name, i, ".weight"), l.*norm.weights, arch.hf_norm_offset);
    // Layers the architecture stores as one tensor (Phi-3's qkv_proj, gate_up_proj) are written as one.
    std::vector<const QuantizedLinear*> alone;
    for (const QuantizedLinear& q : layers[static_cast<size_t>(i)]) alone.push_back(&q);
    for (const Fused& f : kFused) {
      if ((n.*f.name).empty()) continue;
      std::vector<const GptqPacked*> parts;
      for (auto role : f.parts)
        for (auto it = alone.begin(); it != alone.end(); ++it)
          if ((*it)->role == role) {
            parts.push_back(&(*it)->packed);
            alone.erase(it);
            break;
          }
      if (parts.size() != f.parts.size()) throw Error("internal: a fused layer's parts were not all quantized");
      t.gptq(name(n.*f.name, i, ""), gptq_concat_outputs(parts));
    }
    for (const QuantizedLinear* q : alone)
      t.gptq(q->name, q->packed, q->role == &TensorNames::q ? q_rows : q->role == &TensorNames::k ? k_rows : std::vector<int32_t>{});
    if (s.is_moe()) t.matrix(name(n.router, i, ".weight"), l.router);
    if (!l.bq.empty()) t.vector(name(n.q, i, ".bias"), l.bq, q_rows);
    if (!l.bk.empty()) t.vector(name(n.k, i, ".bias"), l.bk, k_rows);
    if (!l.bv.empty()) t.vector(name(n.v, i, ".bias"), l.bv);
  }

  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) throw Error("cannot create " + partial.string() + ": " + ec.message());
  json config;
  if (from_hf) {
    config = read_json_object((in / "config.json").string());
    // A multimodal model's checkpoint holds its text model only: written as that.
    if (config.contains("text_config")) config = config_from_spec(s, model.tokenizer());
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json",
                          "chat_template.jinja", "chat_template.json"})
      if (fs::exists(in / f, ec)) {
        fs::copy_file(in / f, partial / f, ec);
        if (ec) throw Error("cannot copy " + (in / f).string() + ": " + ec.message());
      }
  } else {
    config = config_from_spec(s, model.tokenizer());
    write_tokenizer_hf(load_tokenizer_data(GgufFile::open(source)), model.chat_template(), partial.string());
  }
  const json qc = quantization_config(o, provenance);
  config["quantization_config"] = qc;
  write_json(partial / "config.json", config);
  write_json(partial / "quantize_config.json", qc);
  write_safetensors((partial / "model.safetensors").string(), t.tensors());
  fs::rename(partial, out, ec);
  if (ec) throw Error("cannot rename " + partial.string() + " to " + dir + ": " + ec.message());
}

}  // namespace basalt
