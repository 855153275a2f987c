// SPDX-License-Identifier: MIT
// Loading an HF model folder: config.json gives the spec (core/model/hf_config.h),
// the safetensors files the weights under their PyTorch names, checked against
// the spec's shapes ([out][in], as PyTorch stores a Linear layer).
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/model/gptq_config.h"
#include "core/model/hf_config.h"
#include "core/model/model.h"
#include "core/models/arch.h"
#include "core/tokenizer/tokenizer_hf.h"
#include "core/util/memory.h"
#include "quant/convert_gptq.h"
#include "quant/convert_safetensors.h"
#include "quant/qa_layout.h"

namespace basalt {

namespace {

// Where a multimodal checkpoint keeps the text model's "model." tensors:
// transformers before 4.52 wrote language_model.model.*, later ones
// model.language_model.*; a text-only one has them at model.*.
const char* const kTextModelRoots[] = {"model.", "language_model.model.", "model.language_model."};

class HfTensors {
 public:
  // embd: the architecture's name for the token embedding ("model.embed_tokens"), which tells the root.
  HfTensors(const SafetensorsSet& set, const std::string& dir, const std::optional<GptqConfig>& gptq, const std::string& embd)
      : set_(set), dir_(dir), gptq_(gptq) {
    if (embd.rfind("model.", 0) == 0)
      for (const char* r : kTextModelRoots)
        if (set_.find(r + embd.substr(6) + ".weight")) {
          root_ = r;
          break;
        }
  }

  // The file's name for the architecture's "model.X" (or lm_head).
  std::string file_name(const std::string& name) const {
    if (name.rfind("model.", 0) == 0) return root_ + name.substr(6);
    if (root_ == "language_model.model.") return "language_model." + name;
    return name;
  }
  bool multimodal() const { return root_ != "model."; }
  // Whether a tensor of the file belongs to the text model (a multimodal one's vision tower does not).
  bool in_text_model(const std::string& file_tensor) const {
    return file_tensor.rfind(root_, 0) == 0 || file_tensor.rfind(file_name("lm_head"), 0) == 0;
  }

  const StTensor& get(const std::string& arch_name, const std::vector<int64_t>& shape) const {
    const std::string name = file_name(arch_name);
    const StTensor* t = set_.find(name);
    if (!t) throw Error(dir_ + ": tensor " + name + " is missing");
    if (t->shape != shape)
      throw Error(*t->file + ": tensor " + name + " has shape " + shape_string(t->shape) + ", expected " + shape_string(shape));
    return *t;
  }
  bool has(const std::string& name) const { return set_.find(file_name(name)) != nullptr; }
  // A converted weight's file pages are released as it is made (as the GGUF
  // loader does): resident memory holds the converted copy only.
  Weight weight(const std::string& name, int64_t n_out, int64_t n_in) const {
    const StTensor& t = get(name, {n_out, n_in});
    Weight w = weight_from_safetensors(t, name);
    if (w.data != t.data) release(&t);
    return w;
  }
  std::vector<float> floats(const std::string& name, int64_t n, float offset = 0) const {
    std::vector<float> v = floats_from_safetensors(get(name, {n}));
    for (float& x : v) x += offset;
    return v;
  }

  // The linear layer `prefix` ([n_out][n_in]): prefix.weight as it is, or
  // GPTQ's prefix.qweight (with qzeros, scales, g_idx) converted exactly.
  // A bias is read by the caller where the architecture has one; anywhere
  // else only an all-zero one (AutoGPTQ writes those) is accepted.
  Weight linear(const std::string& prefix, int64_t n_out, int64_t n_in, bool has_bias = false, bool keep_zeros = false) {
    if (!has_bias) refuse_bias(prefix, n_out);
    if (!has(prefix + ".qweight")) return weight(prefix + ".weight", n_out, n_in);
    const GptqTensors t = gptq_tensors(prefix);
    Weight w = gptq_weight(t, n_out, n_in, file_name(prefix), keep_zeros);
    for (const StTensor* part : {t.qweight, t.qzeros, t.scales, t.g_idx}) release(part);
    return w;
  }

  // The linear layer `prefix` whose rows are several layers' (Phi-3's
  // qkv_proj, gate_up_proj): a Weight for each run of rows, as linear() reads
  // a whole one. Dense rows are borrowed from the mapping; GPTQ's outputs are
  // its tensors' columns, copied out.
  std::vector<Weight> split_linear(const std::string& prefix, const std::vector<int64_t>& rows, int64_t n_in) {
    int64_t n_out = 0;
    for (int64_t r : rows) n_out += r;
    refuse_bias(prefix, n_out);
    std::vector<Weight> parts;
    int64_t first = 0;
    if (!has(prefix + ".qweight")) {
      const StTensor& whole = get(prefix + ".weight", {n_out, n_in});
      const size_t row_bytes = whole.n_bytes / static_cast<size_t>(n_out);
      for (int64_t r : rows) {
        StTensor part = whole;
        part.name = rows_name(whole.name, first, r);
        part.shape = {r, n_in};
        part.data = whole.data + static_cast<size_t>(first) * row_bytes;
        part.n_bytes = static_cast<size_t>(r) * row_bytes;
        Weight w = weight_from_safetensors(part, part.name);
        if (w.data != part.data) release(&part);
        parts.push_back(std::move(w));
        first += r;
      }
      return parts;
    }
    const GptqTensors whole = gptq_tensors(prefix);
    if (!whole.qweight || !whole.qzeros || !whole.scales)
      throw Error(dir_ + ": " + file_name(prefix) + ": qweight without qzeros and scales");
    if (whole.qweight->shape.size() != 2 || whole.qweight->shape[1] != n_out)
      throw Error(*whole.qweight->file + ": tensor " + whole.qweight->name + " has shape " +
                  shape_string(whole.qweight->shape) + ", expected " + std::to_string(n_out) + " outputs");
    const int per = 32 / gptq_->params.bits;  // values a qzeros word packs
    for (int64_t r : rows) {
      if (first % per || r % per)
        throw Error(dir_ + ": " + file_name(prefix) + ": a part of " + std::to_string(r) + " rows does not start at a whole qzeros word");
      std::vector<uint8_t> qweight, qzeros, scales;
      const StTensor qw = columns(*whole.qweight, first, r, qweight), qz = columns(*whole.qzeros, first / per, r / per, qzeros),
                     sc = columns(*whole.scales, first, r, scales);
      parts.push_back(gptq_weight({&qw, &qz, &sc, whole.g_idx}, r, n_in, rows_name(file_name(prefix), first, r), false));
      first += r;
    }
    for (const StTensor* part : {whole.qweight, whole.qzeros, whole.scales, whole.g_idx}) release(part);
    return parts;
  }
  // The zero-point format the file stores where its label says otherwise ("" if none).
  const std::string& relabeled() const { return relabeled_; }

 private:
  static void release(const StTensor* t) {
    if (t && t->mapping) t->mapping->release(t->data, t->n_bytes);
  }

  void refuse_bias(const std::string& prefix, int64_t n_out) const {
    if (!has(prefix + ".bias")) return;
    for (float b : floats(prefix + ".bias", n_out))
      if (b != 0) throw Error(dir_ + ": " + prefix + ".bias: this architecture has no bias there");
  }

  GptqTensors gptq_tensors(const std::string& prefix) const {
    if (!gptq_) throw Error(dir_ + ": " + prefix + ".qweight but no quantization config (quantize_config.json)");
    const std::string p = file_name(prefix);
    return {set_.find(p + ".qweight"), set_.find(p + ".qzeros"), set_.find(p + ".scales"), set_.find(p + ".g_idx")};
  }

  // Columns [first, first + count) of a 2-D tensor, copied into `bytes`.
  StTensor columns(const StTensor& t, int64_t first, int64_t count, std::vector<uint8_t>& bytes) const {
    if (t.shape.size() != 2 || first + count > t.shape[1])
      throw Error(*t.file + ": tensor " + t.name + " has shape " + shape_string(t.shape) + ", not the columns asked");
    const size_t elem = t.n_bytes / static_cast<size_t>(t.n_elements()), row = static_cast<size_t>(t.shape[1]) * elem;
    const size_t part = static_cast<size_t>(count) * elem;
    bytes.resize(static_cast<size_t>(t.shape[0]) * part);
    for (int64_t i = 0; i < t.shape[0]; ++i)
      std::memcpy(bytes.data() + static_cast<size_t>(i) * part, t.data + static_cast<size_t>(i) * row + static_cast<size_t>(first) * elem, part);
    return StTensor{t.name, t.dtype, {t.shape[0], count}, bytes.data(), bytes.size(), t.file, nullptr};
  }

  // GPTQ's tensors of one layer ([n_out][n_in]) converted exactly.
  Weight gptq_weight(const GptqTensors& t, int64_t n_out, int64_t n_in, const std::string& name, bool keep_zeros) {
    GptqParams params = gptq_->params;
    params.keep_zeros = keep_zeros;
    if (gptq_->sym) {  // the zeros a symmetric layer stores tell the format, whatever the label says
      const int stored = gptq_uniform_stored_zero(t, params.bits), zero = 1 << (params.bits - 1);
      if (stored == zero - 1 || stored == zero) {
        params.v2 = stored == zero;
        if (params.v2 != gptq_->params.v2) relabeled_ = params.v2 ? "gptq_v2" : "gptq";
      }
    }
    return weight_from_gptq(t, params, n_out, n_in, name);
  }

  const SafetensorsSet& set_;
  const std::string& dir_;
  const std::optional<GptqConfig>& gptq_;
  std::string root_ = "model.";
  std::string relabeled_;
};

// "GPTQ 4-bit g128 act-order sym (gptq)"
std::string describe(const GptqConfig& c, const std::string& relabeled) {
  std::string s = "GPTQ " + std::to_string(c.params.bits) + "-bit ";
  if (c.params.group_size == -1) s += "per-row";
  else s += 'g' + std::to_string(c.params.group_size);  // gcc 12 misreads "g" + string&& (-Wrestrict, its bug 105329)
  if (c.desc_act) s += " act-order";
  s += c.sym ? " sym" : " asym";
  s += c.params.v2 ? " (gptq_v2)" : " (gptq)";
  if (!relabeled.empty()) s += ", zeros stored as " + relabeled + " despite the label";
  return s;
}

}  // namespace

std::unique_ptr<Model> load_hf_model(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path folder(dir);
  if (!fs::exists(folder / "config.json")) throw Error(dir + ": no config.json (not an HF model folder)");
  std::unique_ptr<Model> m(new Model());
  m->spec_ = spec_from_hf_config((folder / "config.json").string());
  ModelSpec& s = m->spec_;
  m->generation_defaults_ = read_generation_defaults((folder / "generation_config.json").string());
  HfTokenizer tok = load_tokenizer_hf(dir);
  m->chat_template_ = std::move(tok.chat_template);
  m->tokenizer_ = std::make_unique<Tokenizer>(std::move(tok.data));
  // The embedding may be padded past the tokenizer's vocabulary (vocab_size in config.json).
  if (m->tokenizer_->n_vocab() > s.n_vocab)
    throw Error(dir + ": tokenizer.json has " + std::to_string(m->tokenizer_->n_vocab()) + " tokens, config.json vocab_size " +
                std::to_string(s.n_vocab));

  const std::optional<GptqConfig> gptq = read_gptq_config(dir);
  const SafetensorsSet& set = m->safetensors_.emplace(SafetensorsSet::open_folder(dir));
  // Tensor names from the architecture's descriptor (core/models/<arch>.cpp).
  const ArchDescriptor& arch = *find_arch(s.arch);
  const TensorNames& n = arch.hf;
  HfTensors L(set, dir, gptq, n.token_embd);
  auto ends_with = [](const std::string& s, const char* tail) {
    return s.size() >= std::strlen(tail) && s.compare(s.size() - std::strlen(tail), std::string::npos, tail) == 0;
  };
  // What loading allocates, checked before anything is: dense weights are borrowed from the
  // mapping, GPTQ layers become qa tiles, and a MoE layer's experts are copied into one stack.
  size_t to_allocate = 0;
  for (const StTensor* t : set.tensors()) {
    if (!L.in_text_model(t->name)) continue;  // a multimodal checkpoint's other towers
    m->file_types_[st_dtype_name(t->dtype)]++;
    const bool qweight = gptq && ends_with(t->name, ".qweight") && t->shape.size() == 2;
    if (qweight) {
      const int64_t n_in = t->shape[0] * (32 / gptq->params.bits), n_out = t->shape[1];
      m->n_params_ += n_in * n_out;
      to_allocate += qa_weight_bytes(gptq->params.bits, QaScales::f16_zero, n_out, n_in) * (s.is_moe() ? 2 : 1);
    } else if (!gptq || !(ends_with(t->name, ".qzeros") || ends_with(t->name, ".scales") || ends_with(t->name, ".g_idx"))) {
      m->n_params_ += t->n_elements();
      if (s.is_moe() && t->shape.size() == 2) to_allocate += t->n_bytes;
    }
  }
  require_memory(to_allocate, dir + ": loading its weights");

  auto name = [](const std::string& pattern, int64_t i = -1, int64_t e = -1) { return tensor_name(pattern, i, e); };
  const int64_t E = s.n_embd, V = s.n_vocab, Q = s.q_dim(), KV = s.kv_dim(), F = s.n_ff;
  auto norm = [&](const std::string& pattern, int64_t i, int64_t size) {
    return L.floats(name(pattern, i) + ".weight", size, arch.hf_norm_offset);
  };
  m->token_embd_ = L.weight(name(n.token_embd) + ".weight", V, E);
  m->output_norm_ = norm(n.output_norm, -1, E);
  // Some tied checkpoints still ship lm_head.weight (a copy): use it when present.
  s.tied_output = !L.has(name(n.output) + ".weight") && !L.has(name(n.output) + ".qweight");
  if (!s.tied_output) m->output_ = L.linear(name(n.output), V, E);

  m->layers_.resize(static_cast<size_t>(s.n_layer));
  for (int64_t i = 0; i < s.n_layer; ++i) {
    LayerWeights& l = m->layers_[static_cast<size_t>(i)];
    for (const LayerNorm& ln : layer_norms())
      if (!(n.*ln.name).empty()) l.*ln.weights = norm(n.*ln.name, i, ln.per_head ? s.head_dim : E);
    if (!n.qkv.empty()) {
      std::vector<Weight> qkv = L.split_linear(name(n.qkv, i), {Q, KV, KV}, E);
      l.wq = std::move(qkv[0]), l.wk = std::move(qkv[1]), l.wv = std::move(qkv[2]);
    } else {
      l.wq = L.linear(name(n.q, i), Q, E, s.attn_bias);
      l.wk = L.linear(name(n.k, i), KV, E, s.attn_bias);
      l.wv = L.linear(name(n.v, i), KV, E, s.attn_bias);
    }
    l.wo = L.linear(name(n.o, i), E, Q);
    if (s.attn_bias) {
      l.bq = L.floats(name(n.q, i) + ".bias", Q);
      l.bk = L.floats(name(n.k, i) + ".bias", KV);
      l.bv = L.floats(name(n.v, i) + ".bias", KV);
    }
    if (s.is_moe()) {  // each expert's layers read (dense or GPTQ), then stacked; asym GPTQ ones all keep zero points
      const bool keep_zeros = gptq && !gptq->sym;
      l.router = L.weight(name(n.router, i) + ".weight", s.n_expert, E);
      std::vector<Weight> gate, up, down;
      for (int64_t x = 0; x < s.n_expert; ++x) {
        gate.push_back(L.linear(name(n.gate_exps, i, x), F, E, false, keep_zeros));
        up.push_back(L.linear(name(n.up_exps, i, x), F, E, false, keep_zeros));
        down.push_back(L.linear(name(n.down_exps, i, x), E, F, false, keep_zeros));
      }
      l.gate_exps = stack_weights(std::move(gate), name(n.gate_exps, i));
      l.up_exps = stack_weights(std::move(up), name(n.up_exps, i));
      l.down_exps = stack_weights(std::move(down), name(n.down_exps, i));
    } else {
      if (!n.gate_up.empty()) {
        std::vector<Weight> gate_up = L.split_linear(name(n.gate_up, i), {F, F}, E);
        l.w_gate = std::move(gate_up[0]), l.w_up = std::move(gate_up[1]);
      } else {
        l.w_gate = L.linear(name(n.gate, i), F, E);
        l.w_up = L.linear(name(n.up, i), F, E);
      }
      l.w_down = L.linear(name(n.down, i), E, F);
    }
  }
  m->source_ = dir + " (HF safetensors, " + std::to_string(set.n_files()) + (set.n_files() == 1 ? " file" : " files") +
               (gptq ? ", " + describe(*gptq, L.relabeled()) : "") + (L.multimodal() ? "; its text model only" : "") + ")";
  return m;
}

}  // namespace basalt
