// SPDX-License-Identifier: MIT
#include "cpu/backend_cpu.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/graph/op_params.h"
#include "core/util/threads.h"
#include "core/model/model.h"
#include "core/util/thread_pool.h"
#include "cpu/matmul.h"
#include "cpu/moe.h"
#include "cpu/ops.h"
#include "cpu/peaks.h"

namespace basalt {

namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const Model&) {}

  const char* name() const override { return "cpu"; }
  bool supports(const Node&) const override { return true; }

  // The engine's own probe (cpu/peaks.h) on all its threads: 64 MiB, a few ms.
  double measure_read_gbs() override {
    const int threads = thread_count();
    return cpu::read_gbs(cpu::make_read_buffer(threads, 64), threads);
  }

  void begin_batch(RunContext& ctx) override {
    quantized_.resize(ctx.graph->tensors.size());
    for (auto& q : quantized_) q.valid = false;
    permuted_from_ = -1;
    for (RopeTable& t : rope_tables_) t.current = false;
    if (wanted_.empty()) {  // the tensors that qa matmuls read: made in int8 form by the op that writes them
      wanted_.assign(ctx.graph->tensors.size(), false);
      for (const Node& n : ctx.graph->nodes)
        if (n.op == Op::matmul && n.weight->format == WeightFormat::qa && n.weight->input_perm.empty())
          wanted_[static_cast<size_t>(n.in[0])] = true;
    }
  }

  void run(const Node& n, RunContext& ctx) override {
    const int64_t rows = ctx.rows(n.out), w_out = ctx.width(n.out);
    float* out = ctx.buf(n.out);
    // The int8 form of out, made by a fused op below, or left to the first matmul that needs it.
    CachedActs& out_q = quantized_[static_cast<size_t>(n.out)];
    out_q.valid = false;
    if (n.out == permuted_from_) permuted_from_ = -1;
    QuantizedActs* fused_q = wanted_[static_cast<size_t>(n.out)] ? &out_q.acts : nullptr;
    const float* in0 = n.in[0] >= 0 ? ctx.buf(n.in[0]) : nullptr;
    switch (n.op) {
      case Op::embed:
        for (int64_t t = 0; t < rows; ++t) dequantize_row(*n.weight, ctx.batch->tokens[t], out + t * w_out);
        if (n.scale != 1)
          for (int64_t i = 0; i < rows * w_out; ++i) out[i] *= n.scale;
        break;
      case Op::rms_norm: {
        const int64_t d = static_cast<int64_t>(n.vec->size());  // the width, or a head's (Gemma 3's Q and K norms)
        if (d <= 0 || w_out % d != 0 || (d != w_out && fused_q))
          throw Error("internal: a norm of " + std::to_string(d) + " weights over rows of " + std::to_string(w_out));
        cpu::rms_norm(in0, n.vec->data(), out, rows * (w_out / d), d, n.eps, fused_q);
        out_q.valid = fused_q != nullptr;
        break;
      }
      case Op::matmul: {
        const Weight& w = *n.weight;
        const float* x = in0;
        const QuantizedActs* xq = nullptr;
        if (!w.input_perm.empty()) {  // GPTQ act-order: the inputs in the order of the weight's columns
          x = permuted(n.in[0], in0, rows, w);
          if (w.format == WeightFormat::qa) xq = &permuted_q_;
        } else if (w.format == WeightFormat::qa) {
          xq = &quantized(n.in[0], ctx);
        }
        matmul({n.weight, x, xq, rows, out, w_out, 0, w.rows});
        if (n.vec && !n.vec->empty())
          for (int64_t t = 0; t < rows; ++t) cpu::add(out + t * w_out, n.vec->data(), out + t * w_out, w_out);
        break;
      }
      case Op::rope: {
        const ModelSpec& s = *ctx.spec;
        if (out != in0) std::memcpy(out, in0, sizeof(float) * rows * w_out);
        const RopeParams p = rope_params(n, s, w_out, ctx.kv->n_ctx());
        if (rows != ctx.batch->size())  // row t is token t: its tables' cos at t, sin at batch size + t
          throw Error("internal: a rope node over " + std::to_string(rows) + " rows in a batch of " +
                      std::to_string(ctx.batch->size()));
        cpu::rope(out, rows, batch_tables(ctx, p), p);
        break;
      }
      case Op::attention:
        cpu::attention(in0, ctx.buf(n.in[1]), ctx.buf(n.in[2]), out, *ctx.batch, *ctx.kv, n.layer, *ctx.spec);
        break;
      case Op::swiglu:
        cpu::swiglu(in0, ctx.buf(n.in[1]), out, rows, w_out, fused_q);
        out_q.valid = fused_q != nullptr;
        break;
      case Op::geglu:
        cpu::geglu(in0, ctx.buf(n.in[1]), out, rows, w_out, fused_q);
        out_q.valid = fused_q != nullptr;
        break;
      case Op::add: cpu::add(in0, ctx.buf(n.in[1]), out, rows * w_out); break;
      case Op::softcap: cpu::softcap(in0, out, rows * w_out, n.scale); break;
      case Op::moe:
        moe_scratch_.observer = nullptr;
        if (ctx.expert_inputs)
          moe_scratch_.observer = [&](int64_t e, int which, const float* x, int64_t ne) { ctx.expert_inputs(n.layer, e, which, x, ne); };
        cpu::moe_ffn(*n.moe, in0, out, rows, w_out, moe_scratch_);
        break;
      case Op::gather_out:
        for (size_t i = 0; i < ctx.out_rows.size(); ++i)
          std::memmove(out + i * w_out, in0 + ctx.out_rows[i] * w_out, sizeof(float) * w_out);
        break;
    }
  }

  void invalidate(int tensor) override {
    if (static_cast<size_t>(tensor) < quantized_.size()) quantized_[static_cast<size_t>(tensor)].valid = false;
    if (tensor == permuted_from_) permuted_from_ = -1;
  }

 private:
  // The batch's RoPE cos and sin for p's base and scale, made at its first
  // rope node and shared by the rest (every layer's Q and K): at 16
  // sequences of Gemma 3 the sines and cosines of each node were 3% of a step.
  const float* batch_tables(RunContext& ctx, const RopeParams& p) {
    auto it = std::find_if(rope_tables_.begin(), rope_tables_.end(),
                           [&](const RopeTable& t) { return t.theta == p.theta_base && t.scale == p.freq_scale; });
    if (it == rope_tables_.end()) it = rope_tables_.insert(rope_tables_.end(), RopeTable{p.theta_base, p.freq_scale, {}, false});
    if (!it->current) {
      it->cs = rope_tables(ctx.batch->pos.data(), ctx.batch->size(), p);
      it->current = true;
    }
    return it->cs.data();
  }

  struct RopeTable {
    float theta, scale;
    std::vector<float> cs;  // rope_tables()
    bool current;           // made for this batch
  };
  std::vector<RopeTable> rope_tables_;

  struct CachedActs {
    QuantizedActs acts;
    bool valid = false;
  };
  // The int8 form of a tensor, made once and shared by the matmuls that read it (Q, K, V).
  const QuantizedActs& quantized(int tensor, RunContext& ctx) {
    CachedActs& c = quantized_[static_cast<size_t>(tensor)];
    if (!c.valid) {
      quantize_activations(ctx.buf(tensor), ctx.rows(tensor), ctx.width(tensor), c.acts);
      c.valid = true;
    }
    return c.acts;
  }

  // Tensor `tensor` (x, rows x w.cols) in the order of w's columns, and its int8 form where w
  // wants one: made once for the matmuls that read the same tensor in the same order (an
  // act-order checkpoint's Q, K and V share their order, as do gate and up).
  const float* permuted(int tensor, const float* x, int64_t rows, const Weight& w) {
    const std::vector<int32_t>& perm = w.input_perm;
    const bool same = permuted_from_ == tensor && permuted_order_ == perm && (w.format != WeightFormat::qa || permuted_q_valid_);
    if (same) return permuted_.data();
    const int64_t cols = w.cols;
    permuted_.resize(static_cast<size_t>(rows * cols));
    parallel_for(rows, std::max<int64_t>(1, 8192 / cols), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t k = 0; k < cols; ++k) permuted_[static_cast<size_t>(t * cols + k)] = x[t * cols + perm[static_cast<size_t>(k)]];
    });
    permuted_q_valid_ = w.format == WeightFormat::qa;
    if (permuted_q_valid_) quantize_activations(permuted_.data(), rows, cols, permuted_q_);
    permuted_from_ = tensor, permuted_order_ = perm;
    return permuted_.data();
  }

  std::vector<CachedActs> quantized_;
  std::vector<bool> wanted_;  // per tensor: read by a qa matmul
  std::vector<float> permuted_;  // a matmul's input reordered (Weight::input_perm), and its int8 form
  QuantizedActs permuted_q_;
  int permuted_from_ = -1;  // the tensor they hold (-1: none, or written since)
  std::vector<int32_t> permuted_order_;
  bool permuted_q_valid_ = false;
  cpu::MoeScratch moe_scratch_;
};

}  // namespace

BackendFactory cpu_backend_factory() {
  return {"cpu", /*host=*/true,
          [](const BackendRequest& r, std::string*) -> std::unique_ptr<Backend> { return std::make_unique<CpuBackend>(r.model); }};
}

}  // namespace basalt
