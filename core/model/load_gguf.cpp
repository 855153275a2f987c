// SPDX-License-Identifier: MIT
// Loading a GGUF file: every tensor the architecture needs is looked up by the
// GGUF name its descriptor gives, its shape checked against the spec, then
// converted to an engine format.
#include "core/error.h"
#include "core/model/model.h"
#include "core/models/arch.h"
#include "core/tokenizer/tokenizer_gguf.h"
#include "core/util/memory.h"
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
  // A converted weight's file pages are released as it is made, a few MB at
  // a time: the peak is the converted weights, not the file beside them.
  Weight weight(const std::string& name, const std::vector<int64_t>& shape) const {
    return weight_from_gguf(info(name, shape), [&](const uint8_t* p, size_t n) { f_.release(p, n); });
  }
  // Weights of consecutive rows of one tensor (Phi-3's fused Q/K/V and
  // gate/up): each part converted from its own rows, as a tensor of its own.
  std::vector<Weight> split_rows(const std::string& name, int64_t n_in, const std::vector<int64_t>& rows) const {
    int64_t total = 0;
    for (int64_t r : rows) total += r;
    const GgufTensorInfo& whole = info(name, {n_in, total});
    const uint64_t row_bytes = whole.n_bytes / static_cast<uint64_t>(total);
    std::vector<Weight> parts;
    int64_t first = 0;
    for (int64_t r : rows) {
      GgufTensorInfo part = whole;
      part.name = rows_name(whole.name, first, r);
      part.dims = {n_in, r};
      part.data = whole.data + static_cast<uint64_t>(first) * row_bytes;
      part.offset = whole.offset + static_cast<uint64_t>(first) * row_bytes;
      part.n_bytes = static_cast<uint64_t>(r) * row_bytes;
      parts.push_back(weight_from_gguf(part, [&](const uint8_t* p, size_t n) { f_.release(p, n); }));
      first += r;
    }
    return parts;
  }
  std::vector<float> floats(const std::string& name, int64_t n) const {
    const GgufTensorInfo& t = info(name, {n});
    std::vector<float> v = floats_from_gguf(t);
    f_.release(t);
    return v;
  }

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
  size_t to_allocate = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    m->n_params_ += t.n_elements();
    m->file_types_[ggml_type_name(t.type)]++;
    to_allocate += converted_bytes(t);
  }
  // A file that parses can still ask for more than the machine has: a clear
  // error now rather than the kernel's OOM killer halfway through converting.
  require_memory(to_allocate, path + ": converting its weights");

  // Tensor names from the architecture's descriptor (core/models/<arch>.cpp).
  const TensorNames& n = find_arch(s.arch)->gguf;
  auto w = [](const std::string& pattern, int64_t i = -1) { return tensor_name(pattern, i, -1, ".weight"); };
  auto b = [](const std::string& pattern, int64_t i) { return tensor_name(pattern, i, -1, ".bias"); };
  TensorLoader L(file);
  const int64_t E = s.n_embd, V = s.n_vocab, Q = s.q_dim(), KV = s.kv_dim(), F = s.n_ff;
  m->token_embd_ = L.weight(w(n.token_embd), {E, V});
  m->output_norm_ = L.floats(w(n.output_norm), E);
  s.tied_output = !L.has(w(n.output));
  if (!s.tied_output) m->output_ = L.weight(w(n.output), {E, V});

  m->layers_.resize(static_cast<size_t>(s.n_layer));
  for (int64_t i = 0; i < s.n_layer; ++i) {
    LayerWeights& l = m->layers_[static_cast<size_t>(i)];
    for (const LayerNorm& norm : layer_norms())
      if (!(n.*norm.name).empty()) l.*norm.weights = L.floats(w(n.*norm.name, i), norm.per_head ? s.head_dim : E);
    if (!n.qkv.empty() && L.has(w(n.qkv, i))) {
      std::vector<Weight> qkv = L.split_rows(w(n.qkv, i), E, {Q, KV, KV});
      l.wq = std::move(qkv[0]), l.wk = std::move(qkv[1]), l.wv = std::move(qkv[2]);
    } else {
      l.wq = L.weight(w(n.q, i), {E, Q});
      l.wk = L.weight(w(n.k, i), {E, KV});
      l.wv = L.weight(w(n.v, i), {E, KV});
    }
    l.wo = L.weight(w(n.o, i), {Q, E});
    if (s.attn_bias) {
      l.bq = L.floats(b(n.q, i), Q);
      l.bk = L.floats(b(n.k, i), KV);
      l.bv = L.floats(b(n.v, i), KV);
    }
    if (s.is_moe()) {
      const int64_t X = s.n_expert;
      l.router = L.weight(w(n.router, i), {E, X});
      l.gate_exps = L.weight(w(n.gate_exps, i), {E, F, X});
      l.up_exps = L.weight(w(n.up_exps, i), {E, F, X});
      l.down_exps = L.weight(w(n.down_exps, i), {F, E, X});
    } else {
      if (!n.gate_up.empty()) {
        std::vector<Weight> gate_up = L.split_rows(w(n.gate_up, i), E, {F, F});
        l.w_gate = std::move(gate_up[0]), l.w_up = std::move(gate_up[1]);
      } else {
        l.w_gate = L.weight(w(n.gate, i), {E, F});
        l.w_up = L.weight(w(n.up, i), {E, F});
      }
      l.w_down = L.weight(w(n.down, i), {F, E});
    }
  }
  m->gguf_->drop_metadata();  // everything the model needs of it is read
  return m;
}

}  // namespace basalt
