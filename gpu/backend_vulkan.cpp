// SPDX-License-Identifier: MIT
// The Vulkan backend. The CPU's KV cache stays the record: attention stores
// the batch's keys and values there (as the CPU op does) and copies the
// blocks it touched to the device's copy, so that a node can fall back to
// the CPU at any time. A node's inputs go up and its output comes back per
// node (one submit each): correct first; keeping activations on the device
// between offloaded nodes is the next step.
#include "gpu/backend_vulkan.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/graph/graph.h"
#include "core/model/model.h"
#include "core/runtime/kv_cache.h"
#include "cpu/backend_cpu.h"
#include "cpu/matmul.h"
#include "cpu/moe.h"
#include "cpu/ops.h"
#include "quant/half.h"

#include "gpu/auto_placement.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "gpu/stream.h"

namespace basalt {

using gpu::AutoPlan;
using gpu::choose_auto;
using gpu::measure_cpu_read_gbs;
using gpu::Throughputs;

namespace {

// A device buffer that grows to what is asked of it.
class Scratch {
 public:
  const gpu::Buffer& at_least(gpu::Device& dev, size_t bytes, const char* what) {
    if (!buf_ || buf_->size() < bytes) {
      buf_.reset();
      buf_ = std::make_unique<gpu::Buffer>(dev, std::max<size_t>(bytes, 1 << 16), gpu::Memory::device, what);
    }
    return *buf_;
  }

 private:
  std::unique_ptr<gpu::Buffer> buf_;
};

class VulkanBackend final : public Backend {
 public:
  VulkanBackend(std::unique_ptr<gpu::Device> device, const Graph& graph, const ModelSpec& spec, const KvCache& kv,
                Placement placement, int gpu_layers, const Model& model)
      : dev_(std::move(device)), spec_(spec), placement_(placement), gpu_layers_(gpu_layers),
        cpu_(make_cpu_backend(model)) {
    // Weights of the matmuls this backend takes, while the device has room for them.
    const uint64_t budget = dev_->info().device_local_bytes / 10 * 8;
    uint64_t used = 0;
    auto upload = [&](std::initializer_list<const Weight*> ws) {  // all of them or none
      uint64_t bytes = 0;
      for (const Weight* w : ws) {
        if (gpu::matmul_shader(*w).empty()) return;
        if (!matrices_.count(w)) bytes += w->total_bytes();
      }
      if (used + bytes > budget) return;  // stays on the CPU
      try {
        for (const Weight* w : ws)
          if (!matrices_.count(w)) matrices_.emplace(w, gpu::upload_matrix(*dev_, *w));
        used += bytes;
      } catch (const gpu::GpuError& e) {
        if (!e.out_of_memory()) throw;
        for (const Weight* w : ws) matrices_.erase(w);
      }
    };
    for (const Node& n : graph.nodes) {
      if (!wants(n)) continue;
      if (n.op == Op::matmul) upload({n.weight});
      if (n.op == Op::moe) upload({n.moe->gate, n.moe->up, n.moe->down});
    }
    // The KV cache's copy, per layer, when it fits beside the weights (else attention stays on the CPU).
    if ((placement_.attn || placement_.all) && gpu::attention_supported(spec.head_dim) && spec.sliding_window == 0) {
      const int64_t blocks = (kv.n_ctx() + KvCache::kBlock - 1) / KvCache::kBlock;
      per_seq_ = blocks * kv.block_stride();
      const size_t bytes = static_cast<size_t>(per_seq_ * kv.n_seq()) * 2;
      const int64_t layers = gpu_layers_ >= 0 ? std::min<int64_t>(gpu_layers_, spec.n_layer) : spec.n_layer;
      if (used + 2 * bytes * static_cast<uint64_t>(layers) <= budget && bytes <= dev_->info().max_storage_range) {
        try {
          for (int64_t l = 0; l < layers; ++l) {
            keys_.push_back(std::make_unique<gpu::Buffer>(*dev_, bytes, gpu::Memory::device, "keys of layer " + std::to_string(l)));
            values_.push_back(std::make_unique<gpu::Buffer>(*dev_, bytes, gpu::Memory::device, "values of layer " + std::to_string(l)));
          }
          used += 2 * bytes * static_cast<uint64_t>(layers);
        } catch (const gpu::GpuError& e) {
          if (!e.out_of_memory()) throw;
          keys_.clear();
          values_.clear();
        }
      }
    }
    weight_bytes_ = used;
  }

  const char* name() const override { return "vulkan"; }

  bool supports(const Node& n) const override {
    if (!wants(n)) return false;
    if (n.op == Op::matmul) return matrices_.count(n.weight) > 0;
    if (n.op == Op::moe) return matrices_.count(n.moe->gate) > 0;  // uploaded together with up and down
    if (n.op == Op::attention) return static_cast<size_t>(n.layer) < keys_.size();
    return false;
  }

  void begin_batch(RunContext& ctx) override { cpu_->begin_batch(ctx); }
  void invalidate(int tensor) override { cpu_->invalidate(tensor); }

  void run(const Node& n, RunContext& ctx) override {
    if (!failed_) {
      try {
        if (n.op == Op::matmul) run_matmul(n, ctx);
        if (n.op == Op::attention) run_attention(n, ctx);
        if (n.op == Op::moe) run_moe(n, ctx);
        cpu_->invalidate(n.out);
        return;
      } catch (const gpu::GpuError& e) {
        // The device is gone or out of memory: the CPU from now on, said once.
        std::fprintf(stderr, "basalt: GPU failed (%s); running on the CPU\n", e.what());
        failed_ = true;
      }
    }
    cpu_->run(n, ctx);
  }

  std::string plan() const {
    std::string what;
    size_t experts = 0;
    for (const auto& [w, m] : matrices_) experts += w->mat_rows < w->rows;
    if (matrices_.size() > experts) what += std::to_string(matrices_.size() - experts) + " matmul weights";
    if (experts) what += std::string(what.empty() ? "" : ", ") + "experts of " + std::to_string(experts / 3) + " layers";
    if (!keys_.empty()) what += std::string(what.empty() ? "" : ", ") + "attention of " + std::to_string(keys_.size()) + " layers";
    return "GPU " + std::to_string(dev_->info().index) + " " + dev_->info().describe() + ": " +
           (what.empty() ? "nothing offloaded" : what) + " (" + std::to_string(weight_bytes_ >> 20) + " MiB on the device)";
  }
  bool offloads_anything() const { return !matrices_.empty() || !keys_.empty(); }

 private:
  bool wants(const Node& n) const {
    if (gpu_layers_ >= 0 && (n.layer < 0 || n.layer >= gpu_layers_)) return false;
    if (n.op == Op::attention) return placement_.attn || placement_.all;
    if (n.op == Op::matmul) return placement_.all && n.layer >= 0;
    if (n.op == Op::moe) return placement_.experts || placement_.all;
    return false;
  }

  void run_matmul(const Node& n, RunContext& ctx) {
    const Weight& w = *n.weight;
    const int64_t rows = ctx.rows(n.out), width = ctx.width(n.out);
    const gpu::Buffer& x = x_.at_least(*dev_, rows * w.cols * 4, "matmul input");
    const gpu::Buffer& y = y_.at_least(*dev_, rows * width * 4, "matmul output");
    float* out = ctx.buf(n.out);
    gpu::Stream& s = stream();
    s.upload(x, ctx.buf(n.in[0]), rows * w.cols * 4);
    gpu::matmul(*dev_, s, {&matrices_.at(n.weight), 0, &x, 0, w.cols, &y, 0, width, rows});
    s.download(y, out, rows * width * 4);
    s.finish();
    if (n.vec && !n.vec->empty())
      for (int64_t t = 0; t < rows; ++t) cpu::add(out + t * width, n.vec->data(), out + t * width, width);
  }

  void run_attention(const Node& n, RunContext& ctx) {
    const Batch& b = *ctx.batch;
    const int64_t rows = b.size(), qd = spec_.q_dim(), kvd = spec_.kv_dim();
    const float* k = ctx.buf(n.in[1]);
    const float* v = ctx.buf(n.in[2]);
    // The batch's keys and values into the CPU's cache, as f16 (the record).
    key16_.resize(static_cast<size_t>(kvd));
    value16_.resize(static_cast<size_t>(kvd));
    for (int64_t t = 0; t < rows; ++t) {
      for (int64_t i = 0; i < kvd; ++i) key16_[i] = f32_to_f16(k[t * kvd + i]), value16_[i] = f32_to_f16(v[t * kvd + i]);
      ctx.kv->set(n.layer, b.seq[t], b.pos[t], key16_.data(), value16_.data());
    }
    const gpu::Buffer& q = x_.at_least(*dev_, rows * qd * 4, "attention queries");
    const gpu::Buffer& o = y_.at_least(*dev_, rows * qd * 4, "attention output");
    const gpu::Buffer& pos = pos_.at_least(*dev_, rows * 4, "positions");
    const gpu::Buffer& kb = *keys_[static_cast<size_t>(n.layer)];
    const gpu::Buffer& vb = *values_[static_cast<size_t>(n.layer)];
    gpu::Stream& s = stream();
    s.upload(q, ctx.buf(n.in[0]), rows * qd * 4);
    s.upload(pos, b.pos.data(), rows * 4);
    const int64_t stride = ctx.kv->block_stride();
    for (int64_t t0 = 0; t0 < rows;) {  // runs of one sequence's tokens
      int64_t t1 = t0 + 1, lo = b.pos[t0], hi = b.pos[t0];
      for (; t1 < rows && b.seq[t1] == b.seq[t0]; ++t1) lo = std::min<int64_t>(lo, b.pos[t1]), hi = std::max<int64_t>(hi, b.pos[t1]);
      // The cache blocks this run wrote, copied to the device.
      const int seq = b.seq[t0];
      const int64_t first = lo / KvCache::kBlock, last = hi / KvCache::kBlock;
      const size_t at = static_cast<size_t>(seq * per_seq_ + first * stride), count = static_cast<size_t>((last - first + 1) * stride);
      s.upload(kb, ctx.kv->key_blocks(n.layer, seq) + first * stride, count * 2, at * 2);
      s.upload(vb, ctx.kv->value_blocks(n.layer, seq) + first * stride, count * 2, at * 2);
      gpu::AttentionOp op{&q, t0 * qd, qd, &kb, &vb, seq * per_seq_, stride, &pos, t0, &o, t0 * qd, qd,
                          t1 - t0, spec_.n_head, spec_.n_head_kv, spec_.head_dim, 0};
      gpu::attention(*dev_, s, op);
      t0 = t1;
    }
    s.download(o, ctx.buf(n.out), rows * qd * 4);
    s.finish();
  }

  // MoE: routing on the CPU (the router is small), then every expert's
  // tokens in one upload, gate and up per expert, one SwiGLU over all rows,
  // down per expert, one download; the CPU adds the weighted rows.
  void run_moe(const Node& n, RunContext& ctx) {
    const MoeWeights& m = *n.moe;
    const int64_t rows = ctx.rows(n.out), d = ctx.width(n.out), E = m.n_expert, K = m.n_used, F = m.n_ff;
    const float* x = ctx.buf(n.in[0]);
    logits_.resize(static_cast<size_t>(rows * E));
    const bool q_router = m.router->format == WeightFormat::qa;  // the CPU's router, as cpu::moe_ffn runs it
    if (q_router) quantize_activations(x, rows, d, router_xq_);
    matmul({m.router, x, q_router ? &router_xq_ : nullptr, rows, logits_.data(), E, 0, E});
    choice_.resize(static_cast<size_t>(rows * K));
    choice_w_.resize(static_cast<size_t>(rows * K));
    for (int64_t t = 0; t < rows; ++t)
      cpu::route_top_k(logits_.data() + t * E, E, K, choice_.data() + t * K, choice_w_.data() + t * K);
    // Rows grouped by expert: expert e's rows are [first[e], first[e + 1]).
    std::vector<int64_t> first(static_cast<size_t>(E + 1), 0);
    for (int32_t e : choice_) ++first[static_cast<size_t>(e) + 1];
    for (int64_t e = 0; e < E; ++e) first[e + 1] += first[e];
    const int64_t total = rows * K;
    sorted_x_.resize(static_cast<size_t>(total * d));
    row_token_.resize(static_cast<size_t>(total));
    row_weight_.resize(static_cast<size_t>(total));
    std::vector<int64_t> next(first.begin(), first.end() - 1);
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t i = 0; i < K; ++i) {
        const int64_t r = next[static_cast<size_t>(choice_[t * K + i])]++;
        std::copy_n(x + t * d, d, sorted_x_.data() + r * d);
        row_token_[static_cast<size_t>(r)] = t;
        row_weight_[static_cast<size_t>(r)] = choice_w_[t * K + i];
      }
    const gpu::Buffer& xb = x_.at_least(*dev_, total * d * 4, "expert inputs");
    const gpu::Buffer& gb = gate_.at_least(*dev_, total * F * 4, "expert gates");
    const gpu::Buffer& ub = up_.at_least(*dev_, total * F * 4, "expert ups");
    const gpu::Buffer& yb = y_.at_least(*dev_, total * d * 4, "expert outputs");
    const gpu::GpuMatrix &gw = matrices_.at(m.gate), &uw = matrices_.at(m.up), &dw = matrices_.at(m.down);
    gpu::Stream& s = stream();
    s.upload(xb, sorted_x_.data(), total * d * 4);
    for (int64_t e = 0; e < E; ++e) {
      const int64_t ne = first[e + 1] - first[e];
      if (ne == 0) continue;
      gpu::matmul(*dev_, s, {&gw, e, &xb, first[e] * d, d, &gb, first[e] * F, F, ne});
      gpu::matmul(*dev_, s, {&uw, e, &xb, first[e] * d, d, &ub, first[e] * F, F, ne});
    }
    gpu::swiglu(*dev_, s, gb, ub, total * F);
    for (int64_t e = 0; e < E; ++e) {
      const int64_t ne = first[e + 1] - first[e];
      if (ne > 0) gpu::matmul(*dev_, s, {&dw, e, &gb, first[e] * F, F, &yb, first[e] * d, d, ne});
    }
    sorted_y_.resize(static_cast<size_t>(total * d));
    s.download(yb, sorted_y_.data(), total * d * 4);
    s.finish();
    float* y = ctx.buf(n.out);
    std::fill(y, y + rows * d, 0.0f);
    for (int64_t r = 0; r < total; ++r) {
      float* yt = y + row_token_[static_cast<size_t>(r)] * d;
      const float w = row_weight_[static_cast<size_t>(r)];
      const float* yr = sorted_y_.data() + r * d;
      for (int64_t j = 0; j < d; ++j) yt[j] += w * yr[j];
    }
  }

  gpu::Stream& stream() {
    if (!stream_) stream_ = std::make_unique<gpu::Stream>(*dev_);
    return *stream_;
  }

  std::unique_ptr<gpu::Device> dev_;
  const ModelSpec& spec_;
  Placement placement_;
  int gpu_layers_;
  std::unique_ptr<Backend> cpu_;  // the fallback
  bool failed_ = false;
  std::unordered_map<const Weight*, gpu::GpuMatrix> matrices_;
  std::vector<std::unique_ptr<gpu::Buffer>> keys_, values_;  // per layer: the cache's blocks, all sequences
  int64_t per_seq_ = 0;                                      // f16 elements of one sequence's blocks
  uint64_t weight_bytes_ = 0;
  std::unique_ptr<gpu::Stream> stream_;
  Scratch x_, y_, pos_, gate_, up_;
  std::vector<uint16_t> key16_, value16_;
  std::vector<float> logits_, choice_w_, sorted_x_, sorted_y_, row_weight_;
  std::vector<int32_t> choice_;
  QuantizedActs router_xq_;
  std::vector<int64_t> row_token_;
};

}  // namespace

std::unique_ptr<Backend> make_vulkan_backend(const Graph& graph, const Model& model, const KvCache& kv,
                                             const OffloadOptions& options, std::string* plan) {
  Placement p = parse_placement(options.gpu);
  if (!p.any()) return nullptr;
  std::string why;
  const std::vector<gpu::GpuInfo> gpus = gpu::list_gpus(&why);
  if (gpus.empty()) {
    *plan = (why.empty() ? std::string("no Vulkan device") : why) + "; running on the CPU";
    return nullptr;
  }
  int index = options.device;
  if (index >= static_cast<int>(gpus.size()))
    throw Error("--gpu-device " + std::to_string(index) + ": there are " + std::to_string(gpus.size()) + " Vulkan devices");
  if (index < 0) index = gpu::pick_gpu(gpus, /*allow_cpu=*/!p.auto_pick);
  if (index < 0) {
    *plan = p.auto_pick && gpu::pick_gpu(gpus, true) >= 0
                ? "GPU: " + gpus[static_cast<size_t>(gpu::pick_gpu(gpus, true))].name +
                      " is a CPU implementation, not faster than running on the CPU; running on the CPU"
                : "no usable Vulkan device; running on the CPU";
    return nullptr;
  }
  std::string auto_why;
  if (p.auto_pick) {
    Throughputs t;
    t.cpu_read_gbs = measure_cpu_read_gbs();
    const AutoPlan a = choose_auto(gpus[static_cast<size_t>(index)], model.spec(), graph, kv.n_ctx(), t);
    if (!a.placement.any()) {
      *plan = "GPU " + gpus[static_cast<size_t>(index)].name + ": auto: " + a.why + "; running on the CPU";
      return nullptr;
    }
    p = a.placement;
    auto_why = " (auto: " + a.why + ")";
  }
  try {
    auto backend = std::make_unique<VulkanBackend>(gpu::Device::open(index), graph, model.spec(), kv, p,
                                                   options.gpu_layers, model);
    *plan = backend->plan() + auto_why;
    if (!backend->offloads_anything()) return nullptr;
    return backend;
  } catch (const gpu::GpuError& e) {
    *plan = std::string("GPU: ") + e.what() + "; running on the CPU";
    return nullptr;
  }
}
}  // namespace basalt
