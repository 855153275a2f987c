// SPDX-License-Identifier: MIT
// The loaded model, whatever it came from: the loaders are load_gguf.cpp
// (GGUF files) and load_hf.cpp (HF folders).
#include "core/model/model.h"

#include <filesystem>

namespace basalt {

std::unique_ptr<Model> load_gguf_model(const std::string& path);
std::unique_ptr<Model> load_hf_model(const std::string& dir);

std::string shape_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
  std::error_code ec;
  std::unique_ptr<Model> m = std::filesystem::is_directory(path, ec) ? load_hf_model(path) : load_gguf_model(path);
  if (options.quantize) m->quantize_dense(*options.quantize);
  return m;
}

void Model::quantize_dense(RtnType type) {
  auto convert = [](Weight& w, RtnType t) {
    if (w.rows > 0 && w.format != WeightFormat::qa) w = quantize_rtn(w, t);
  };
  convert(token_embd_, RtnType::q8_0);
  if (!spec_.tied_output) convert(output_, RtnType::q8_0);
  for (LayerWeights& l : layers_)
    for (Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.gate_exps, &l.up_exps, &l.down_exps})
      convert(*w, type);
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
