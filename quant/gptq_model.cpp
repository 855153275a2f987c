// SPDX-License-Identifier: MIT
#include "quant/gptq_model.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/graph/executor.h"
#include "core/runtime/kv_cache.h"
#include "cpu/matmul.h"

namespace basalt {

namespace {

std::vector<float> dequantized(const Weight& w) {
  std::vector<float> f(static_cast<size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) dequantize_row(w, r, f.data() + r * w.cols);
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
  BlockCalibration(const Graph& g, const LayerWeights& l, int layer) {
    std::map<int, int> reader;  // tensor -> the input its current contents are (-1: none yet)
    linear_input_.assign(kNumBlockLinears, -1);
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
        for (size_t li = 0; li < kNumBlockLinears; ++li)
          if (n.weight == &(l.*kBlockLinears[li].member)) linear_input_[li] = it->second;
      }
      reader[n.out] = -1;  // overwritten: later readers see new contents
    }
    for (size_t li = 0; li < kNumBlockLinears; ++li)
      if (linear_input_[li] < 0) throw Error("internal: linear layer " + std::string(kBlockLinears[li].hf_name) + " not in the graph");
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

std::vector<std::vector<GptqPacked>> quantize_model(Model& model, const std::vector<std::vector<int32_t>>& windows,
                                                    const ModelQuantizeOptions& o,
                                                    const std::function<void(const QuantizeProgress&)>& progress) {
  const ModelSpec& s = model.spec();
  if (s.is_moe()) throw Error("quantize: models with experts (MoE) are not supported yet");
  for (int64_t i = 0; i < s.n_layer; ++i)
    for (const BlockLinear& b : kBlockLinears)
      if (!(model.layer(i).*b.member).input_perm.empty() || (model.layer(i).*b.member).scales == QaScales::f16_zero)
        throw Error("quantize: the model is GPTQ-quantized already");
  if (o.gptq && windows.empty()) throw Error("quantize: GPTQ needs calibration windows");
  auto report = [&](int64_t layer, const char* stage, double fraction) {
    if (progress) progress({layer, s.n_layer, stage, fraction});
  };

  std::vector<std::vector<GptqPacked>> packed(static_cast<size_t>(s.n_layer), std::vector<GptqPacked>(kNumBlockLinears));
  auto install = [&](int64_t layer, size_t li, const GptqLayer& q) {
    GptqPacked p = gptq_pack(q, o.layer, o.v2);
    Weight& w = model.layer_for_update(layer).*kBlockLinears[li].member;
    w = gptq_packed_weight(p, w.name);
    packed[static_cast<size_t>(layer)][li] = std::move(p);
  };

  if (!o.gptq) {
    for (int64_t i = 0; i < s.n_layer; ++i) {
      for (size_t li = 0; li < kNumBlockLinears; ++li) {
        const Weight& w = model.layer(i).*kBlockLinears[li].member;
        install(i, li, rtn_quantize(dequantized(w).data(), w.rows, w.cols, o.layer));
      }
      report(i, "solving", static_cast<double>(i + 1) / static_cast<double>(s.n_layer));
    }
    return packed;
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
    int64_t t = 0;
    for (const auto& w : windows)
      for (int32_t token : w) {
        if (token < 0 || token >= s.n_vocab) throw Error("quantize: calibration token " + std::to_string(token) + " outside the vocabulary");
        dequantize_row(model.token_embd(), token, x.data() + t++ * E);
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
    BlockCalibration calib(exec.graph(), model.layer(i), static_cast<int>(i));
    exec.set_before_node([&](size_t node, const RunContext& ctx) { calib.observe(node, ctx); });
    pass(static_cast<int>(i), false, "calibrating", base, base + 0.45 * span);
    exec.set_before_node({});
    for (size_t li = 0; li < kNumBlockLinears; ++li) {
      const Weight& w = model.layer(i).*kBlockLinears[li].member;
      install(i, li, gptq_quantize(dequantized(w).data(), w.rows, w.cols, calib.hessian(li, o.layer), o.layer));
      report(i, "solving", base + span * (0.45 + 0.1 * static_cast<double>(li + 1) / kNumBlockLinears));
    }
    pass(static_cast<int>(i), true, "updating", base + 0.55 * span, base + span);
  }
  return packed;
}

}  // namespace basalt
