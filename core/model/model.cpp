// SPDX-License-Identifier: MIT
// The loaded model, whatever it came from: the loaders are load_gguf.cpp
// (GGUF files) and load_hf.cpp (HF folders).
#include "core/model/model.h"

#include <filesystem>

#include "core/error.h"
#include "core/util/memory.h"
#include "quant/qa_layout.h"

namespace basalt {

std::unique_ptr<Model> load_gguf_model(const std::string& path);
std::unique_ptr<Model> load_hf_model(const std::string& dir);

std::string shape_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string rows_name(const std::string& tensor, int64_t first, int64_t count) {
  return tensor + "[" + std::to_string(first) + ":" + std::to_string(first + count) + "]";
}

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
  std::error_code ec;
  std::unique_ptr<Model> m = std::filesystem::is_directory(path, ec) ? load_hf_model(path) : load_gguf_model(path);
  if (options.quantize) m->quantize_dense(*options.quantize);
  if (options.window > 0 || options.attention_sinks > 0) {
    if (options.window <= 0 || options.attention_sinks < 0)
      throw Error("--attention-sinks needs --window (the positions each token sees after the sinks)");
    if (m->spec_.sliding_window > 0)
      throw Error(path + " has a sliding window of its own (" + std::to_string(m->spec_.sliding_window) +
                  " positions): --window and --attention-sinks are for models without one");
    m->spec_.sliding_window = options.window, m->spec_.swa_period = 0, m->spec_.attention_sinks = options.attention_sinks;
  }
  return m;
}

void Model::quantize_dense(RtnType type) {
  // Every dense weight, and its target: the embedding and output layer q8_0 whatever `type` is.
  auto each_dense = [&](auto&& fn) {
    auto visit = [&](Weight& w, RtnType t) {
      if (w.rows > 0 && w.format != WeightFormat::qa) fn(w, t);
    };
    visit(token_embd_, RtnType::q8_0);
    if (!spec_.tied_output) visit(output_, RtnType::q8_0);
    for (LayerWeights& l : layers_)
      for (Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.gate_exps, &l.up_exps, &l.down_exps})
        visit(*w, type);
  };
  size_t to_allocate = 0;
  each_dense([&](const Weight& w, RtnType t) {
    to_allocate += qa_weight_bytes(t == RtnType::q8_0 ? 8 : 4, QaScales::f16_sym, w.mat_rows, w.cols, w.rows / w.mat_rows);
  });
  require_memory(to_allocate, "quantizing the model's dense weights to " + std::string(rtn_type_name(type)));
  each_dense([](Weight& w, RtnType t) { w = quantize_rtn(w, t); });
}

std::vector<const Weight*> Model::weights() const {
  std::vector<const Weight*> out{&token_embd_};
  if (!spec_.tied_output) out.push_back(&output_);
  for (const LayerWeights& l : layers_)
    for (const Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router, &l.gate_exps,
                            &l.up_exps, &l.down_exps})
      if (w->rows > 0) out.push_back(w);
  return out;
}

size_t Model::weight_bytes() const {
  size_t n = 0;
  for (const Weight* w : weights()) n += w->total_bytes();
  return n;
}

}  // namespace basalt
