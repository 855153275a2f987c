// SPDX-License-Identifier: MIT
#include "core/model/hf_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/models/arch.h"
#include "core/models/blocks.h"
#include "core/util/json_text.h"
#include "core/util/mapped_file.h"

namespace basalt {

using nlohmann::json;

bool HfConfig::has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

int64_t HfConfig::need_int(const char* key) const {
  if (!has(key)) throw Error(where_ + ": " + key + " is missing");
  return get_int(key, 0);
}

int64_t HfConfig::get_int(const char* key, int64_t fallback) const {
  if (!has(key)) return fallback;
  if (!j_[key].is_number_integer()) throw Error(where_ + ": " + key + " must be an integer, got " + j_[key].dump());
  return j_[key].get<int64_t>();
}

double HfConfig::get_float(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  if (!j_[key].is_number()) throw Error(where_ + ": " + key + " must be a number, got " + j_[key].dump());
  return j_[key].get<double>();
}

bool HfConfig::get_bool(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!j_[key].is_boolean()) throw Error(where_ + ": " + key + " must be true or false, got " + j_[key].dump());
  return j_[key].get<bool>();
}

std::string HfConfig::get_string(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!j_[key].is_string()) throw Error(where_ + ": " + key + " must be a string, got " + j_[key].dump());
  return j_[key].get<std::string>();
}

size_t HfConfig::list_size(const char* key) const {
  if (!has(key)) return 0;
  if (!j_[key].is_array()) throw Error(where_ + ": " + key + " must be a list, got " + j_[key].dump());
  return j_[key].size();
}

// By transformers' _compute_llama3_parameters: pairs whose wavelength is
// shorter than original / high_freq_factor keep theirs, longer than
// original / low_freq_factor are divided by `factor`, and a smooth mix between.
std::vector<float> llama3_rope_factors(const ModelSpec& s, double factor, double low, double high, double original) {
  std::vector<float> out(static_cast<size_t>(s.rope_dim / 2));
  for (size_t i = 0; i < out.size(); ++i) {
    const double freq = std::pow(static_cast<double>(s.rope_theta), -2.0 * static_cast<double>(i) / static_cast<double>(s.rope_dim));
    const double wavelen = 2 * M_PI / freq;
    double f = 1;
    if (wavelen > original / low) {
      f = factor;
    } else if (wavelen >= original / high) {
      const double smooth = (original / wavelen - low) / (high - low);
      f = 1 / ((1 - smooth) / factor + smooth);
    }
    out[i] = static_cast<float>(f);
  }
  return out;
}

namespace {

// Which layers attend through config.json's sliding_window: layer_types
// (transformers' list of "sliding_attention"/"full_attention"), else Qwen2's
// use_sliding_window with max_window_layers (the layers from it on), else
// sliding_window_pattern (every Nth layer full; Gemma's own where the file
// names none), else all of them. The
// engine's spec holds all, or all but every Nth: another pattern is an Error,
// not a model run with the wrong window.
void read_sliding_window(const json& j, const HfConfig& c, const std::string& where, const ArchDescriptor& a, ModelSpec& s) {
  const int64_t window = c.get_int("sliding_window", 0);
  const auto n = static_cast<size_t>(s.n_layer);
  std::vector<bool> windowed(n, true);
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const json& types = j["layer_types"];
    if (!types.is_array() || types.size() != n)
      throw Error(where + ": layer_types must be a list of " + std::to_string(n) + " layer types");
    for (size_t i = 0; i < n; ++i) {
      const std::string t = types[i].is_string() ? types[i].get<std::string>() : types[i].dump();
      if (t != "sliding_attention" && t != "full_attention")
        throw Error(where + ": layer_types[" + std::to_string(i) + "] is " + t + " (supported: sliding_attention, full_attention)");
      windowed[i] = t == "sliding_attention";
    }
  } else {
    // Qwen2 configs name a window but switch it off with use_sliding_window.
    if (!c.get_bool("use_sliding_window", a.hf_sliding_window)) return;
    const int64_t from = c.get_int("max_window_layers", 0);
    const int64_t period = c.get_int("sliding_window_pattern", c.get_int("_sliding_window_pattern", a.hf_swa_period));
    for (size_t i = 0; i < n; ++i)
      windowed[i] = static_cast<int64_t>(i) >= from && (period <= 0 || static_cast<int64_t>(i) % period != period - 1);
  }
  if (window <= 0 || window >= s.n_ctx_train || std::none_of(windowed.begin(), windowed.end(), [](bool w) { return w; }))
    return;  // no layer's window is shorter than the context
  for (int64_t period = 0; period <= s.n_layer; period += period == 0 ? 2 : 1) {  // 0: every layer, then 2, 3, ...
    bool fits = true;
    for (size_t i = 0; i < n && fits; ++i)
      fits = windowed[i] == (period == 0 || static_cast<int64_t>(i) % period != period - 1);
    if (fits) {
      s.sliding_window = window, s.swa_period = period;
      return;
    }
  }
  throw Error(where + ": this pattern of sliding-window layers is not supported (all of them, or all but every Nth)");
}

// LongRoPE's short_factor or long_factor list: one positive factor per pair.
std::vector<float> longrope_factors(const json& r, const char* key, const std::string& at, const ModelSpec& s) {
  const json* list = r.contains(key) ? &r[key] : nullptr;
  const auto pairs = static_cast<size_t>(s.rope_dim / 2);
  if (!list || !list->is_array() || list->size() != pairs)
    throw Error(at + ": " + key + " must be a list of " + std::to_string(pairs) + " numbers (one per rotated pair)");
  std::vector<float> out;
  for (const json& x : *list) {
    if (!x.is_number() || !(x.get<double>() > 0)) throw Error(at + ": " + key + " holds " + x.dump() + ", not a positive number");
    out.push_back(x.get<float>());
  }
  return out;
}

// config.json's rope_scaling (at: where it is, for messages): linear, yarn,
// llama3 or longrope (and "default": none). original: the config's own
// original_max_position_embeddings (Phi-3 keeps it beside rope_scaling).
void read_rope_scaling(const json& r, const std::string& at, int64_t original_ctx, ModelSpec& s) {
  if (!r.is_object()) throw Error(at + " must be an object");
  const HfConfig c(r, at);
  const json& type = r.contains("rope_type") ? r["rope_type"] : (r.contains("type") ? r["type"] : json());
  const std::string t = type.is_string() ? type.get<std::string>() : "";
  if (t == "default") return;
  if (t != "linear" && t != "yarn" && t != "llama3" && t != "longrope" && t != "su")
    throw Error(at + ": type " + type.dump() + " is not supported (supported: linear, yarn, llama3, longrope)");
  const auto original = static_cast<double>(c.get_int("original_max_position_embeddings", original_ctx));
  if (!(original > 0)) throw Error(at + ": original_max_position_embeddings must be positive");
  if (t == "longrope" || t == "su") {  // "su": its name in Phi-3's first configs
    // transformers' _compute_longrope_parameters: the attention factor from
    // how far the context reaches past the original, unless the config names one.
    s.rope_freq_factors = longrope_factors(r, "short_factor", at, s);
    s.rope_long_factors = longrope_factors(r, "long_factor", at, s);
    s.rope_long_context = static_cast<int64_t>(original);
    const double reach = original < static_cast<double>(s.n_ctx_train) ? static_cast<double>(s.n_ctx_train) / original
                                                                       : c.get_float("factor", 1.0);
    const double attention = c.get_float("attention_factor", reach > 1 ? std::sqrt(1 + std::log(reach) / std::log(original)) : 1.0);
    if (!(attention > 0)) throw Error(at + ": attention_factor must be positive");
    s.rope_attn_factor = static_cast<float>(attention);
    return;
  }
  const double factor = c.get_float("factor", 0);
  if (!(factor > 0)) throw Error(at + ": factor must be a positive number");
  if (t == "linear") {
    s.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (t == "yarn") {
    for (const char* key : {"mscale", "mscale_all_dim"})  // DeepSeek's variant
      if (r.contains(key)) throw Error(at + ": " + key + " (DeepSeek's YaRN) is not supported");
    if (!c.get_bool("truncate", true)) throw Error(at + ": truncate false is not supported");
    s.rope_freq_scale = static_cast<float>(1.0 / factor);
    s.yarn_orig_ctx = static_cast<int64_t>(original);
    s.yarn_beta_fast = static_cast<float>(c.get_float("beta_fast", 32));
    s.yarn_beta_slow = static_cast<float>(c.get_float("beta_slow", 1));
    // attention_factor replaces the default 1 + 0.1 ln(factor) (which make_rope applies).
    const double attention = c.get_float("attention_factor", 0);
    if (attention > 0) s.rope_attn_factor = static_cast<float>(attention / (factor > 1 ? 1 + 0.1 * std::log(factor) : 1.0));
  } else {
    const double low = c.get_float("low_freq_factor", 0), high = c.get_float("high_freq_factor", 0);
    if (!(low > 0 && high > low)) throw Error(at + ": llama3 needs 0 < low_freq_factor < high_freq_factor");
    s.rope_freq_factors = llama3_rope_factors(s, factor, low, high, original);
  }
}

// How many of a head's dimensions RoPE turns: partial_rotary_factor of them (Phi-4-mini: 0.75).
int64_t rotary_dims(const HfConfig& c, const ModelSpec& s) {
  const double f = c.get_float("partial_rotary_factor", 1.0);
  if (!(f > 0 && f <= 1)) throw Error(c.where() + ": partial_rotary_factor must be in (0, 1]");
  return static_cast<int64_t>(static_cast<double>(s.head_dim) * f);  // truncated, as transformers does
}

// transformers 5 writes RoPE as rope_parameters: rope_theta and the scaling in
// one object, or one per layer type (Gemma 3: {"full_attention": ...,
// "sliding_attention": ...}, the local layers' base their own). Read after
// rope_theta and rope_scaling, which it replaces.
void read_rope_parameters(const json& r, const std::string& where, const ArchDescriptor& a, int64_t original_ctx, ModelSpec& s) {
  const std::string at = where + ": rope_parameters";
  if (!r.is_object()) throw Error(at + " must be an object");
  auto read = [&](const json& p, const std::string& p_at) {
    if (!p.is_object()) throw Error(p_at + " must be an object");
    const HfConfig c(p, p_at);
    s.rope_theta = static_cast<float>(c.get_float("rope_theta", s.rope_theta));
    if (p.contains("partial_rotary_factor")) s.rope_dim = rotary_dims(c, s);
    if (c.has("rope_type") || c.has("type")) read_rope_scaling(p, p_at, original_ctx, s);
  };
  if (!r.contains("full_attention") && !r.contains("sliding_attention")) return read(r, at);
  if (r.contains("full_attention")) read(r["full_attention"], at + ".full_attention");
  if (!r.contains("sliding_attention")) return;
  const json& local = r["sliding_attention"];
  const std::string local_at = at + ".sliding_attention";
  if (!local.is_object()) throw Error(local_at + " must be an object");
  const HfConfig c(local, local_at);
  const std::string type = c.get_string("rope_type", "default");
  if (type != "default") throw Error(local_at + ": rope_type " + type + " is not supported (the local layers' RoPE is unscaled)");
  const auto theta = static_cast<float>(c.get_float("rope_theta", s.rope_theta));
  if (!(theta > 0)) throw Error(local_at + ": rope_theta must be positive");
  if (theta != s.rope_theta && a.build_graph != build_gemma_graph)
    throw Error(local_at + ": a RoPE base of the local layers' own is not supported for " + a.name);
  s.rope_theta_swa = theta;
}

}  // namespace

// The text model's keys: the file's (or, for a multimodal class, its
// text_config's) over the class's defaults.
json text_model_config(const json& file, const HfClass& cls, const std::string& where) {
  const json* own = &file;
  if (cls.text_config) {
    if (!file.contains(cls.text_config) || !file[cls.text_config].is_object())
      throw Error(where + ": " + cls.name + " needs a " + cls.text_config + " object");
    own = &file[cls.text_config];
  }
  json merged = cls.defaults ? json::parse(cls.defaults) : json::object();
  merged.update(*own);
  return merged;
}

ModelSpec spec_from_hf_config_text(const std::string& text, const std::string& file_where) {
  const json file = parse_json_object(text, file_where);
  if (!file.contains("architectures") || !file["architectures"].is_array() || file["architectures"].empty() ||
      !file["architectures"][0].is_string())
    throw Error(file_where + ": no architectures list");
  const std::string cls = file["architectures"][0].get<std::string>();
  const HfClass* hf_class = nullptr;
  const ArchDescriptor* a = find_arch_for_hf_class(cls, &hf_class);
  if (!a)
    throw Error(file_where + ": architecture " + cls + " is not supported (supported: " + supported_hf_class_names() + ")");

  const json j = text_model_config(file, *hf_class, file_where);
  const std::string where = hf_class->text_config ? file_where + ": " + hf_class->text_config : file_where;
  const HfConfig c(j, where);
  ModelSpec s;
  s.arch = a->name;
  s.name = file.contains("_name_or_path") && file["_name_or_path"].is_string() ? file["_name_or_path"].get<std::string>() : cls;
  s.n_vocab = c.need_int("vocab_size");
  s.n_embd = c.need_int("hidden_size");
  s.n_layer = c.need_int("num_hidden_layers");
  s.n_head = c.need_int("num_attention_heads");
  s.n_head_kv = c.get_int("num_key_value_heads", s.n_head);
  s.head_dim = c.get_int("head_dim", s.n_head > 0 ? s.n_embd / s.n_head : 0);
  s.rope_dim = rotary_dims(c, s);
  s.n_ff = c.need_int("intermediate_size");
  s.n_ctx_train = c.get_int("max_position_embeddings", 2048);
  s.rms_eps = static_cast<float>(c.get_float("rms_norm_eps", 1e-6));
  s.rope_theta = static_cast<float>(c.get_float("rope_theta", 10000.0));
  s.rope_style = RopeStyle::neox;
  s.attn_bias = a->attn_bias;
  s.tied_output = c.get_bool("tie_word_embeddings", false);
  if (hf_class->moe) {
    s.n_expert = c.need_int(c.has("num_experts") ? "num_experts" : "num_local_experts");  // Qwen3-MoE's name, Mixtral's
    s.n_expert_used = c.need_int("num_experts_per_tok");
  }
  const int64_t original_ctx = c.get_int("original_max_position_embeddings", s.n_ctx_train);
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    read_rope_scaling(j["rope_scaling"], where + ": rope_scaling", original_ctx, s);
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) read_rope_parameters(j["rope_parameters"], where, *a, original_ctx, s);
  read_sliding_window(j, c, where, *a, s);
  if (a->read_hf) a->read_hf(c, s);
  validate_spec(s, where);
  if (s.n_vocab <= 0 || s.n_vocab > (1 << 24)) throw Error(where + ": vocab_size " + std::to_string(s.n_vocab));
  return s;
}

GenerationDefaults read_generation_defaults(const std::string& path) {
  GenerationDefaults g;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return g;
  const json j = read_json_object(path);
  const HfConfig c(j, path);
  auto number = [&](const char* key, std::optional<float>& out) {
    if (j.contains(key) && !j[key].is_null()) out = static_cast<float>(c.get_float(key, 0));
  };
  number("temperature", g.temperature);
  number("top_p", g.top_p);
  number("repetition_penalty", g.repeat_penalty);
  if (j.contains("top_k") && !j["top_k"].is_null()) g.top_k = static_cast<int32_t>(c.get_int("top_k", 0));
  if (j.contains("do_sample") && !j["do_sample"].is_null()) g.do_sample = c.get_bool("do_sample", false);
  return g;
}

ModelSpec spec_from_hf_config(const std::string& path) {
  const MappedFile f = MappedFile::map(path);
  return spec_from_hf_config_text(std::string(reinterpret_cast<const char*>(f.data()), f.size()), path);
}

}  // namespace basalt
