// SPDX-License-Identifier: MIT
// Loading a GGUF file: every tensor the architecture needs is looked up by its
// GGUF name, its shape checked against the spec, then converted to an engine format.
#include "core/error.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer_gguf.h"
#include "quant/convert_gguf.h"

namespace basalt {

namespace {

class TensorLoader {
 public:
  explicit TensorLoader(const GgufFile& f) : f_(f) {}

  const GgufTensorInfo& info(const std::string& name, const std::vector<int64_t>& shape) const {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) throw Error(f_.path() + ": tensor " + name + " is missing");
    if (t->dims != shape)
      throw Error(f_.path() + ": tensor " + name + " has shape " + shape_string(t->dims) + ", expected " + shape_string(shape));
    return *t;
  }
  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
  Weight weight(const std::string& name, const std::vector<int64_t>& shape) const {
    return weight_from_gguf(info(name, shape));
  }
  std::vector<float> floats(const std::string& name, int64_t n) const { return floats_from_gguf(info(name, {n})); }

 private:
  const GgufFile& f_;
};

}  // namespace


std::unique_ptr<Model> load_gguf_model(const std::string& path) {
  std::unique_ptr<Model> m(new Model());
  const GgufFile& file = m->gguf_.emplace(GgufFile::open(path));
  m->spec_ = spec_from_gguf(file);
  ModelSpec& s = m->spec_;
  m->tokenizer_ = std::make_unique<Tokenizer>(load_tokenizer_data(file));
  s.n_vocab = m->tokenizer_->n_vocab();
  m->chat_template_ = file.get_string("tokenizer.chat_template").value_or("");
  m->source_ = path + " (GGUF v" + std::to_string(file.version()) + ")";
  for (const GgufTensorInfo& t : file.tensors()) {
    m->n_params_ += t.n_elements();
    m->file_types_[ggml_type_name(t.type)]++;
  }

  TensorLoader L(file);
  const int64_t E = s.n_embd, V = s.n_vocab, Q = s.q_dim(), KV = s.kv_dim(), F = s.n_ff;
  m->token_embd_ = L.weight("token_embd.weight", {E, V});
  m->output_norm_ = L.floats("output_norm.weight", E);
  s.tied_output = !L.has("output.weight");
  if (!s.tied_output) m->output_ = L.weight("output.weight", {E, V});

  m->layers_.resize(static_cast<size_t>(s.n_layer));
  for (int64_t i = 0; i < s.n_layer; ++i) {
    LayerWeights& l = m->layers_[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    l.attn_norm = L.floats(p + "attn_norm.weight", E);
    l.ffn_norm = L.floats(p + "ffn_norm.weight", E);
    l.wq = L.weight(p + "attn_q.weight", {E, Q});
    l.wk = L.weight(p + "attn_k.weight", {E, KV});
    l.wv = L.weight(p + "attn_v.weight", {E, KV});
    l.wo = L.weight(p + "attn_output.weight", {Q, E});
    if (s.attn_bias) {
      l.bq = L.floats(p + "attn_q.bias", Q);
      l.bk = L.floats(p + "attn_k.bias", KV);
      l.bv = L.floats(p + "attn_v.bias", KV);
    }
    if (s.is_moe()) {
      const int64_t X = s.n_expert;
      l.router = L.weight(p + "ffn_gate_inp.weight", {E, X});
      l.gate_exps = L.weight(p + "ffn_gate_exps.weight", {E, F, X});
      l.up_exps = L.weight(p + "ffn_up_exps.weight", {E, F, X});
      l.down_exps = L.weight(p + "ffn_down_exps.weight", {F, E, X});
    } else {
      l.w_gate = L.weight(p + "ffn_gate.weight", {E, F});
      l.w_up = L.weight(p + "ffn_up.weight", {E, F});
      l.w_down = L.weight(p + "ffn_down.weight", {F, E});
    }
  }
  return m;
}

}  // namespace basalt
