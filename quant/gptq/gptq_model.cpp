// SPDX-License-Identifier: MIT
#include "quant/gptq/gptq_model.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>

#include "core/error.h"
#include "core/runtime/executor.h"
#include "core/graph/kv_cache.h"
#include "cpu/matmul.h"

namespace basalt {

namespace {

// Rows [r0, r1) as floats.
std::vector<float> dequantized(const Weight& w, int64_t r0, int64_t r1) {
  std::vector<float> f(static_cast<size_t>((r1 - r0) * w.cols));
  for (int64_t r = r0; r < r1; ++r) dequantize_row(w, r, f.data() + (r - r0) * w.cols);
  return f;
}

// h += X^T X for X [rows][n], through the engine's f32 GEMM: X^T as both the
// weight and the input.
class GramAccumulator {
 public:
  void add(const float* x, int64_t rows, int64_t n, std::vector<double>& h) {
    xt_.resize(static_cast<size_t>(n * rows));
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t i = 0; i < n; ++i) xt_[static_cast<size_t>(i * rows + t)] = x[t * n + i];
    Weight w;
    w.name = "calibration inputs";
    w.format = WeightFormat::f32;
    w.rows = w.mat_rows = n;
    w.cols = rows;
    w.row_bytes = static_cast<size_t>(rows) * sizeof(float);
    w.data = reinterpret_cast<const uint8_t*>(xt_.data());
    g_.resize(static_cast<size_t>(n * n));
    matmul({&w, xt_.data(), nullptr, n, g_.data(), n, 0, n});
    for (size_t i = 0; i < g_.size(); ++i) h[i] += g_[i];
  }

 private:
  std::vector<float> xt_, g_;
};

// An input that some of a block's linear layers read, and its H.
struct LayerInput {
  int64_t n = 0;
  size_t first_node = 0;  // the matmul that accumulates it (the others read the same rows)
  std::vector<double> h;
  GptqHessian prepared;
};

class BlockCalibration {
 public:
  // The block's first n_linear entries of kBlockLinears (4 for an MoE block: attention only).
  BlockCalibration(const Graph& g, const LayerWeights& l, int layer, size_t n_linear) {
    std::map<int, int> reader;  // tensor -> the input its current contents are (-1: none yet)
    linear_input_.assign(n_linear, -1);
    for (size_t j = 0; j < g.nodes.size(); ++j) {
      const Node& n = g.nodes[j];
      if (n.layer != layer) continue;
      if (n.op == Op::matmul) {
        auto it = reader.find(n.in[0]);
        if (it == reader.end() || it->second < 0) {
          inputs_.push_back({g.tensors[static_cast<size_t>(n.in[0])].width, j, {}, {}});
          it = reader.insert_or_assign(n.in[0], static_cast<int>(inputs_.size()) - 1).first;
        }
        node_input_[j] = it->second;
        for (size_t li = 0; li < n_linear; ++li)
          if (n.weight == &(l.*kBlockLinears[li].member)) linear_input_[li] = it->second;
      }
      reader[n.out] = -1;  // overwritten: later readers see new contents
    }
    for (size_t li = 0; li < n_linear; ++li)
      if (linear_input_[li] < 0) throw Error("internal: linear layer " + std::to_string(li) + " not in the graph");
    for (LayerInput& in : inputs_) in.h.assign(static_cast<size_t>(in.n * in.n), 0.0);
  }

  void observe(size_t node, const RunContext& ctx) {
    auto it = node_input_.find(node);
    if (it == node_input_.end()) return;
    LayerInput& in = inputs_[static_cast<size_t>(it->second)];
    if (in.first_node != node) return;
    const int tensor = ctx.graph->nodes[node].in[0];
    gram_.add(ctx.buf(tensor), ctx.rows(tensor), in.n, in.h);
  }

  // The prepared H of linear li's input (factored once for all the layers that read it).
  const GptqHessian& hessian(size_t li, const GptqOptions& opt) {
    LayerInput& in = inputs_[static_cast<size_t>(linear_input_[li])];
    if (in.prepared.n == 0) in.prepared = gptq_prepare(std::move(in.h), in.n, opt);
    return in.prepared;
  }

 private:
  std::vector<LayerInput> inputs_;
  std::map<size_t, int> node_input_;
  std::vector<int> linear_input_;
  GramAccumulator gram_;
};

}  // namespace

std::vector<std::vector<QuantizedLinear>> quantize_model(Model& model, const std::vector<std::vector<int32_t>>& windows,
                                                         const ModelQuantizeOptions& o,
                                                         const std::function<void(const QuantizeProgress&)>& progress) {
  const ModelSpec& s = model.spec();
  // Before any calibration: a checkpoint needs the architecture's HF class and names.
  if (find_arch(s.arch)->hf_classes.empty())
    throw Error("quantize: architecture " + s.arch + " cannot be written as an HF GPTQ checkpoint yet (supported: " +
                supported_hf_class_names() + ")");
  const size_t n_dense = s.is_moe() ? kNumAttentionLinears : std::size(kBlockLinears);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const LayerWeights& l = model.layer(i);
    for (const Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.gate_exps, &l.up_exps, &l.down_exps})
      if (!w->input_perm.empty() || w->scales == QaScales::f16_zero) throw Error("quantize: the model is GPTQ-quantized already");
  }
  if (o.gptq && windows.empty()) throw Error("quantize: GPTQ needs calibration windows");
  // The engine's qa blocks hold 32 inputs: a group is whole blocks.
  if (o.layer.group_size != -1 && (o.layer.group_size < 32 || o.layer.group_size % 32))
    throw Error("quantize: group size " + std::to_string(o.layer.group_size) +
                " is not a multiple of 32, nor -1 (one group per row)");
  auto report = [&](int64_t layer, const char* stage, double fraction) {
    if (progress) progress({layer, s.n_layer, stage, fraction});
  };

  std::vector<std::vector<QuantizedLinear>> out(static_cast<size_t>(s.n_layer));
  const TensorNames& names = find_arch(s.arch)->hf;  // what the checkpoint calls each layer
  // Dense layer li of block i, from its GptqLayer: packed, and swapped into the model.
  auto install = [&](int64_t i, size_t li, const GptqLayer& q) {
    GptqPacked p = gptq_pack(q, o.layer, o.v2);
    Weight& w = model.layer_for_update(i).*kBlockLinears[li].member;
    w = gptq_packed_weight(p, w.name);
    const auto role = kBlockLinears[li].role;
    out[static_cast<size_t>(i)].push_back({tensor_name(names.*role, i), role, std::move(p)});
  };
  // Block i's experts: quantize(e, which input (0: gate/up's, 1: down's), the stacked weight, e's rows) gives
  // each expert's layer; stacked back into the model.
  auto install_experts = [&](int64_t i, const std::function<GptqLayer(int64_t, int, const Weight&, int64_t, int64_t)>& quantize) {
    LayerWeights& l = model.layer_for_update(i);
    struct Part {
      Weight LayerWeights::*member;
      std::string TensorNames::*role;
      int which;
    };
    const Part parts[] = {{&LayerWeights::gate_exps, &TensorNames::gate_exps, 0},
                          {&LayerWeights::down_exps, &TensorNames::down_exps, 1},
                          {&LayerWeights::up_exps, &TensorNames::up_exps, 0}};
    std::vector<std::vector<Weight>> engine(3);
    for (int64_t e = 0; e < s.n_expert; ++e)
      for (size_t k = 0; k < 3; ++k) {
        const Weight& w = l.*parts[k].member;
        GptqPacked p = gptq_pack(quantize(e, parts[k].which, w, e * w.mat_rows, (e + 1) * w.mat_rows), o.layer, o.v2);
        engine[k].push_back(gptq_packed_weight(p, w.name));
        out[static_cast<size_t>(i)].push_back({tensor_name(names.*parts[k].role, i, e), parts[k].role, std::move(p)});
      }
    for (size_t k = 0; k < 3; ++k) {
      Weight& w = l.*parts[k].member;
      w = stack_weights(std::move(engine[k]), w.name);
    }
  };

  if (!o.gptq) {
    for (int64_t i = 0; i < s.n_layer; ++i) {
      for (size_t li = 0; li < n_dense; ++li) {
        const Weight& w = model.layer(i).*kBlockLinears[li].member;
        install(i, li, rtn_quantize(dequantized(w, 0, w.rows).data(), w.rows, w.cols, o.layer));
      }
      if (s.is_moe())
        install_experts(i, [&](int64_t, int, const Weight& w, int64_t r0, int64_t r1) {
          return rtn_quantize(dequantized(w, r0, r1).data(), r1 - r0, w.cols, o.layer);
        });
      report(i, "solving", static_cast<double>(i + 1) / static_cast<double>(s.n_layer));
    }
    return out;
  }

  int64_t longest = 0, total = 0;
  for (const auto& w : windows) {
    if (w.empty()) throw Error("quantize: an empty calibration window");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(w.size()));
    total += static_cast<int64_t>(w.size());
  }
  KvCache kv(s, longest, 1);
  Executor exec(model, kv, std::min(o.ubatch, longest));
  const int64_t E = s.n_embd;
  const int x_tensor = exec.graph().tokens_out;
  std::vector<float> x(static_cast<size_t>(total * E));  // the residual stream of every window's tokens
  {
    // The graph's embedding, scaled as its node says (Gemma: by sqrt(n_embd)).
    const auto embed = std::find_if(exec.graph().nodes.begin(), exec.graph().nodes.end(), [](const Node& n) { return n.op == Op::embed; });
    const float scale = embed == exec.graph().nodes.end() ? 1.0f : embed->scale;
    int64_t t = 0;
    for (const auto& w : windows)
      for (int32_t token : w) {
        if (token < 0 || token >= s.n_vocab) throw Error("quantize: calibration token " + std::to_string(token) + " outside the vocabulary");
        float* row = x.data() + t++ * E;
        dequantize_row(model.token_embd(), token, row);
        for (int64_t i = 0; i < E; ++i) row[i] *= scale;
      }
  }

  // One pass of block i over every window; write_back: its outputs become the stream.
  auto pass = [&](int layer, bool write_back, const char* stage, double from, double to) {
    int64_t offset = 0;
    for (size_t wi = 0; wi < windows.size(); ++wi) {
      const auto& w = windows[wi];
      for (int64_t begin = 0; begin < static_cast<int64_t>(w.size()); begin += exec.max_batch()) {
        const int64_t end = std::min<int64_t>(static_cast<int64_t>(w.size()), begin + exec.max_batch());
        Batch b;
        for (int64_t p = begin; p < end; ++p) b.add(w[static_cast<size_t>(p)], static_cast<int32_t>(p), 0, false);
        float* rows = x.data() + (offset + begin) * E;
        std::memcpy(exec.tensor(x_tensor), rows, sizeof(float) * static_cast<size_t>((end - begin) * E));
        exec.run_layers(b, layer, layer);
        if (write_back) std::memcpy(rows, exec.tensor(x_tensor), sizeof(float) * static_cast<size_t>((end - begin) * E));
      }
      offset += static_cast<int64_t>(w.size());
      report(layer, stage, from + (to - from) * static_cast<double>(wi + 1) / static_cast<double>(windows.size()));
    }
  };

  // Per block: calibration 45% of its time, solving 10%, the update pass 45% (roughly; for the ETA only).
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const double base = static_cast<double>(i) / static_cast<double>(s.n_layer), span = 1.0 / static_cast<double>(s.n_layer);
    BlockCalibration calib(exec.graph(), model.layer(i), static_cast<int>(i), n_dense);
    // MoE: H of each expert's two inputs (gate/up's, down's), from the tokens routed to it.
    std::vector<std::vector<double>> expert_h(static_cast<size_t>(2 * s.n_expert));
    GramAccumulator expert_gram;
    exec.set_before_node([&](size_t node, const RunContext& ctx) { calib.observe(node, ctx); });
    if (s.is_moe())
      exec.set_expert_inputs([&](int layer, int64_t e, int which, const float* xe, int64_t rows) {
        if (layer != i) return;
        const int64_t n = which == 0 ? s.n_embd : s.n_ff;
        std::vector<double>& h = expert_h[static_cast<size_t>(2 * e + which)];
        if (h.empty()) h.assign(static_cast<size_t>(n * n), 0.0);
        expert_gram.add(xe, rows, n, h);
      });
    pass(static_cast<int>(i), false, "calibrating", base, base + 0.45 * span);
    exec.set_before_node({});
    exec.set_expert_inputs({});
    for (size_t li = 0; li < n_dense; ++li) {
      const Weight& w = model.layer(i).*kBlockLinears[li].member;
      install(i, li, gptq_quantize(dequantized(w, 0, w.rows).data(), w.rows, w.cols, calib.hessian(li, o.layer), o.layer));
      report(i, "solving", base + span * (0.45 + 0.1 * static_cast<double>(li + 1) / static_cast<double>(n_dense)));
    }
    if (s.is_moe()) {
      std::vector<GptqHessian> prepared(expert_h.size());
      install_experts(i, [&](int64_t e, int which, const Weight& w, int64_t r0, int64_t r1) {
        const size_t k = static_cast<size_t>(2 * e + which);
        const std::vector<float> dense = dequantized(w, r0, r1);
        if (expert_h[k].empty() && prepared[k].n == 0) return rtn_quantize(dense.data(), r1 - r0, w.cols, o.layer);  // never routed to
        if (prepared[k].n == 0) prepared[k] = gptq_prepare(std::move(expert_h[k]), w.cols, o.layer);
        return gptq_quantize(dense.data(), r1 - r0, w.cols, prepared[k], o.layer);
      });
    }
    pass(static_cast<int>(i), true, "updating", base + 0.55 * span, base + span);
  }
  return out;
}

}  // namespace basalt
