// SPDX-License-Identifier: MIT
// The Vulkan backend. Tensors it writes stay on the device (and its nodes
// are recorded into one command stream) until someone else reads them: then
// the executor's sync_to_host() downloads them and the stream is submitted.
// With `--gpu all` a whole block runs on the device, with one upload at the
// start of the batch and one download at its end.
//
// The host's KV cache stays the record: attention stores the batch's keys and
// values into the device's copy (same type and layout; kv_store*.comp, rounded
// as the CPU rounds) and their f32 rows come back with the next submission,
// when the host's cache gets them too. So the work can move to the host at any
// time: a GPU error prints one line and throws BackendFailed, and the executor
// places every node on the host backend and runs the batch again.
#include "gpu/backend_vulkan.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/graph/graph.h"
#include "core/model/model.h"
#include "core/graph/kv_cache.h"
#include "gpu/auto_placement.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "gpu/stream.h"
#include "core/util/half.h"

namespace basalt {

using gpu::AutoPlan;
using gpu::choose_auto;
using gpu::Throughputs;

namespace {

class VulkanBackend final : public Backend {
 public:
  VulkanBackend(std::unique_ptr<gpu::Device> device, const Graph& graph, const ModelSpec& spec, const KvCache& kv,
                Placement placement, int gpu_layers, int64_t memory_mib)
      : dev_(std::move(device)), spec_(spec), placement_(placement), gpu_layers_(gpu_layers),
        tensors_(graph.tensors.size()) {
    if (const char* f = std::getenv("BASALT_GPU_FAIL_AFTER")) fail_after_ = std::atoll(f);
    // Weights of the matmuls this backend takes, while the device has room
    // for them (80% of its memory, or less if the user said so), in graph order.
    uint64_t budget = dev_->info().device_local_bytes / 10 * 8;
    if (memory_mib > 0) budget = std::min<uint64_t>(budget, static_cast<uint64_t>(memory_mib) << 20);
    uint64_t used = 0;
    gpu::Uploader uploader(*dev_);  // copies overlap reading the next weight
    auto upload = [&](std::initializer_list<const Weight*> ws) {  // all of them or none; true if all
      uint64_t bytes = 0;
      for (const Weight* w : ws) {
        if (gpu::matmul_shader(*w).empty()) return false;
        if (!matrices_.count(w)) bytes += w->total_bytes();
      }
      if (used + bytes > budget) return false;  // stays on the CPU
      try {
        for (const Weight* w : ws)
          if (!matrices_.count(w)) matrices_.emplace(w, gpu::upload_matrix(*dev_, *w, 0, &uploader));
        used += bytes;
        return true;
      } catch (const gpu::GpuError& e) {
        if (!e.out_of_memory()) throw;
        uploader.finish();  // no copy may still target the buffers freed here
        for (const Weight* w : ws) matrices_.erase(w);
        return false;
      }
    };
    auto upload_vector = [&](const std::vector<float>* v) {
      if (vectors_.count(v)) return;
      auto b = std::make_unique<gpu::Buffer>(*dev_, v->size() * 4, gpu::Memory::device, "vector weights");
      uploader.write(*b, v->data(), v->size() * 4);
      vectors_.emplace(v, std::move(b));
    };
    for (const Node& n : graph.nodes) {
      if (!wants(n)) continue;
      if (n.op == Op::matmul && upload({n.weight}) && n.vec && !n.vec->empty()) upload_vector(n.vec);  // a bias
      if (n.op == Op::moe && n.moe->n_expert <= gpu::kMaxRoutedExperts &&
          upload({n.moe->router, n.moe->gate, n.moe->up, n.moe->down}))
        ++moe_layers_;
      if (n.op == Op::rms_norm) upload_vector(n.vec);
    }
    uploader.finish();
    // The KV cache's copy, per layer, when it fits beside the weights (else
    // attention stays on the CPU). A ringed sliding-window layer's copy
    // holds the rings' pool only (KvCache::layer_blocks).
    if ((placement_.attn || placement_.all) && gpu::attention_supported(spec.head_dim, kv.type())) {
      const int64_t layers = gpu_layers_ >= 0 ? std::min<int64_t>(gpu_layers_, spec.n_layer) : spec.n_layer;
      auto layer_bytes = [&](int64_t l, int side) { return static_cast<size_t>(kv.layer_blocks(l) * kv.block_bytes(side)); };
      uint64_t total = 0;
      for (int64_t l = 0; l < layers; ++l) total += layer_bytes(l, 0) + layer_bytes(l, 1);
      if (used + total <= budget && static_cast<size_t>(kv.n_blocks() * kv.block_bytes()) <= dev_->info().max_storage_range) {
        try {
          for (int64_t l = 0; l < layers; ++l) {
            keys_.push_back(std::make_unique<gpu::Buffer>(*dev_, layer_bytes(l, 0), gpu::Memory::device, "keys of layer " + std::to_string(l)));
            values_.push_back(std::make_unique<gpu::Buffer>(*dev_, layer_bytes(l, 1), gpu::Memory::device, "values of layer " + std::to_string(l)));
            if (kv_side_type(kv.type(), 0) == KvType::q4)
              key_stages_.push_back(std::make_unique<gpu::Buffer>(*dev_, gpu::kv_stage_bytes(kv.n_seq(), spec.kv_dim()),
                                                                  gpu::Memory::device, "key stage of layer " + std::to_string(l)));
          }
          used += total;
        } catch (const gpu::GpuError& e) {
          if (!e.out_of_memory()) throw;
          keys_.clear();
          values_.clear();
          key_stages_.clear();
        }
      }
    }
    weight_bytes_ = used;
  }

  ~VulkanBackend() override {
    try {
      flush(nullptr);
    } catch (const std::exception&) {  // nothing a destructor can do
    }
  }

  const char* name() const override { return "vulkan"; }

  bool supports(const Node& n) const override {
    if (!wants(n)) return false;
    switch (n.op) {
      case Op::matmul: return matrices_.count(n.weight) > 0 && (!n.vec || n.vec->empty() || vectors_.count(n.vec) > 0);
      case Op::moe: return matrices_.count(n.moe->gate) > 0;  // uploaded together with the router, up and down
      case Op::attention: return static_cast<size_t>(n.layer) < keys_.size();
      case Op::rope: return n.out == n.in[0] && spec_.rope_dim >= 2;
      // The norms of whole rows, and of each head (Qwen3's, Gemma 3's Q and K norms): rows of head_dim.
      case Op::rms_norm:
        return vectors_.count(n.vec) > 0 && (n.vec->size() == static_cast<size_t>(spec_.n_embd) ||
                                             n.vec->size() == static_cast<size_t>(spec_.head_dim));
      case Op::gather_out:
      case Op::add:
      case Op::swiglu: return true;
      default: return false;
    }
  }

  void begin_batch(RunContext& ctx) override {
    if (failed_) throw BackendFailed("the GPU failed earlier");
    try {
      flush(&ctx);  // normally a no-op: the last batch ended with a download
    } catch (const gpu::GpuError& e) {
      fail(e);
    }
    for (DeviceTensor& t : tensors_) t.on_device = t.host_stale = false;
    batch_uploaded_ = false;
    try {
      record_kv_copies(*ctx.kv);
    } catch (const gpu::GpuError& e) {
      fail(e);
    }
  }

  void copy_kv_block(const KvBlockCopy& copy) override {
    if (!keys_.empty()) kv_copies_.push_back(copy);  // recorded at the next batch's start, in its submission
  }

  void invalidate(int tensor) override {
    DeviceTensor& t = tensors_[static_cast<size_t>(tensor)];
    t.on_device = t.host_stale = false;
  }

  void sync_to_host(int tensor, RunContext& ctx) override {
    DeviceTensor& t = tensors_[static_cast<size_t>(tensor)];
    if (!t.host_stale || failed_) return;
    try {
      stream().download(*t.buf, ctx.buf(tensor), bytes_of(tensor, ctx));
      t.host_stale = false;
      flush(&ctx);
    } catch (const gpu::GpuError& e) {
      fail(e);  // the host copy of this tensor is lost
    }
  }

  void run(const Node& n, RunContext& ctx) override {
    if (failed_) throw BackendFailed("the GPU failed earlier");
    try {
      run_on_gpu(n, ctx);
    } catch (const gpu::GpuError& e) {
      // What only the device held (tensors newer there, keys and values not yet
      // in the host's cache) is gone: the executor runs the batch again elsewhere.
      fail(e);
    }
  }

  bool healthy() const override { return !failed_; }

  std::string plan() const {
    std::string what;
    const size_t matmuls = matrices_.size() - 4 * static_cast<size_t>(moe_layers_);  // a MoE layer's router, gate, up, down
    if (matmuls) what += std::to_string(matmuls) + " matmul weights";
    if (moe_layers_) what += std::string(what.empty() ? "" : ", ") + "experts of " + std::to_string(moe_layers_) + " layers";
    if (!keys_.empty()) what += std::string(what.empty() ? "" : ", ") + "attention of " + std::to_string(keys_.size()) + " layers";
    if (placement_.all) what += std::string(what.empty() ? "" : ", ") + "norms, RoPE, adds and SwiGLU";
    return "GPU " + std::to_string(dev_->info().index) + " " + dev_->info().describe() + ": " +
           (what.empty() ? "nothing offloaded" : what) + " (" + std::to_string(weight_bytes_ >> 20) +
           " MiB on the device; shaders: " + dev_->variants() + ")";
  }
  bool offloads_anything() const { return !matrices_.empty() || !keys_.empty(); }

 private:
  // A graph tensor's device copy: on_device when it holds the newest
  // contents, host_stale when the host's copy (RunContext::buf) is older.
  struct DeviceTensor {
    std::unique_ptr<gpu::Buffer> buf;
    bool on_device = false, host_stale = false;
  };

  bool wants(const Node& n) const {
    if (gpu_layers_ >= 0 && (n.layer < 0 || n.layer >= gpu_layers_)) return false;
    switch (n.op) {
      case Op::attention: return placement_.attn || placement_.all;
      case Op::moe: return placement_.experts || placement_.all;
      case Op::matmul:
      case Op::rms_norm:
      case Op::rope:
      case Op::add:
      case Op::swiglu:
      case Op::gather_out: return placement_.all;  // the blocks, and after them the final norm and the output layer
      default: return false;
    }
  }

  static size_t bytes_of(int tensor, const RunContext& ctx) {
    return static_cast<size_t>(ctx.rows(tensor) * ctx.width(tensor)) * 4;
  }

  // A buffer of at least bytes; growing it first submits what the stream
  // recorded (which may use the old one).
  const gpu::Buffer& ensure(std::unique_ptr<gpu::Buffer>& b, size_t bytes, const char* what, RunContext* ctx) {
    if (!b || b->size() < bytes) {
      flush(ctx);
      b.reset();
      b = std::make_unique<gpu::Buffer>(*dev_, std::max<size_t>(bytes, 1 << 16), gpu::Memory::device, what);
    }
    return *b;
  }

  // The tensor's newest contents on the device (uploaded from the host if needed).
  const gpu::Buffer& input(int tensor, RunContext& ctx) {
    DeviceTensor& t = tensors_[static_cast<size_t>(tensor)];
    if (t.on_device) return *t.buf;
    ensure(t.buf, bytes_of(tensor, ctx), "activations", &ctx);
    stream().upload(*t.buf, ctx.buf(tensor), bytes_of(tensor, ctx));
    t.on_device = true;
    return *t.buf;
  }

  // The tensor's device buffer, to be written by the node being recorded
  // (the caller marks it written with written()). Its old contents are dead
  // (an in-place op has read them as its input) and are not downloaded: the
  // graph reuses tensors in every layer, and a download here was a submission
  // and a wait per reuse (~60 us each on a real GPU). A tensor's size is fixed
  // within a batch, so its buffer grows only at its first write of a batch,
  // when begin_batch() has left nothing stale.
  const gpu::Buffer& output(int tensor, RunContext& ctx) {
    return ensure(tensors_[static_cast<size_t>(tensor)].buf, bytes_of(tensor, ctx), "activations", &ctx);
  }
  void written(int tensor) {
    DeviceTensor& t = tensors_[static_cast<size_t>(tensor)];
    t.on_device = t.host_stale = true;
  }

  // The block copies asked since the last batch, each layer's in one command.
  // A copy's destination is a block nobody has read yet, never another's source.
  void record_kv_copies(const KvCache& cache) {
    if (kv_copies_.empty()) return;
    for (int ringed = 0; ringed < (cache.ring_blocks() > 0 ? 2 : 1); ++ringed)  // the pool's layers, then the rings' (their own ids)
      for (int kv = 0; kv < 2; ++kv) {
        std::vector<gpu::Stream::Range> ranges;
        const auto bb = static_cast<size_t>(cache.block_bytes(kv));
        for (const KvBlockCopy& c : kv_copies_)
          ranges.push_back(ringed ? gpu::Stream::Range{c.ring_src * bb, c.ring_dst * bb, bb} : gpu::Stream::Range{c.src * bb, c.dst * bb, bb});
        for (size_t l = 0; l < keys_.size(); ++l) {
          if (cache.ringed(static_cast<int64_t>(l)) != (ringed == 1)) continue;
          const gpu::Buffer& layer = *(kv == 0 ? keys_ : values_)[l];
          stream().copy(layer, layer, ranges);
        }
      }
    kv_copies_.clear();
  }

  // Submits the stream and waits; then the CPU cache gets the keys and values that came back.
  void flush(RunContext* ctx) {
    if (stream_ && !stream_->empty()) stream_->finish();
    for (PendingKv& p : pending_kv_)
      p.kv->store_batch(p.layer, p.seq.data(), p.pos.data(), static_cast<int64_t>(p.seq.size()), p.k.data(), p.v.data());
    pending_kv_.clear();
  }

  // The device is gone, and with it whatever only it held: the executor
  // drops this backend and runs the batch again on the others.
  [[noreturn]] void fail(const gpu::GpuError& e) {
    std::fprintf(stderr, "basalt: GPU failed (%s); running on the CPU\n", e.what());
    failed_ = true;
    stream_.reset();
    pending_kv_.clear();
    throw BackendFailed(std::string("GPU failed: ") + e.what());
  }

  void run_on_gpu(const Node& n, RunContext& ctx) {
    if (fail_after_ >= 0 && nodes_run_++ >= fail_after_)  // BASALT_GPU_FAIL_AFTER: the fallback's test
      throw gpu::GpuError("device lost (injected by BASALT_GPU_FAIL_AFTER)", VK_ERROR_DEVICE_LOST);
    const int64_t rows = ctx.rows(n.out), width = ctx.width(n.out);
    gpu::Stream& s = stream();
    switch (n.op) {
      case Op::matmul: {
        const gpu::Buffer& x = input(n.in[0], ctx);
        const gpu::Buffer& y = output(n.out, ctx);
        gpu::matmul(*dev_, s, {&matrices_.at(n.weight), 0, &x, 0, n.weight->cols, &y, 0, width, rows});
        written(n.out);
        if (n.vec && !n.vec->empty()) gpu::add(*dev_, s, y, *vectors_.at(n.vec), y, rows * width, width);  // Qwen2's q, k, v bias
        break;
      }
      case Op::rms_norm: {
        const gpu::Buffer& x = input(n.in[0], ctx);
        const gpu::Buffer& y = output(n.out, ctx);
        const auto d = static_cast<int64_t>(n.vec->size());  // width, or head_dim: each head a row
        gpu::rms_norm(*dev_, s, x, 0, *vectors_.at(n.vec), y, 0, rows * (width / d), d, n.eps);
        written(n.out);
        break;
      }
      case Op::rope: {
        const gpu::Buffer& x = input(n.in[0], ctx);
        const RopeParams p = rope_params(n, spec_, width, ctx.kv->n_ctx());
        gpu::rope(*dev_, s, x, 0, batch_tables(ctx, p), rows, p);
        written(n.out);
        break;
      }
      case Op::gather_out: {  // the rows that want logits, copied on the device
        const gpu::Buffer& x = input(n.in[0], ctx);
        const gpu::Buffer& y = output(n.out, ctx);
        const size_t row = static_cast<size_t>(width) * 4;
        std::vector<gpu::Stream::Range> ranges;
        for (size_t i = 0; i < ctx.out_rows.size(); ++i)
          ranges.push_back({static_cast<size_t>(ctx.out_rows[i]) * row, i * row, row});
        s.copy(x, y, ranges);
        written(n.out);
        break;
      }
      case Op::add: {
        const gpu::Buffer& a = input(n.in[0], ctx);
        const gpu::Buffer& b = input(n.in[1], ctx);
        const gpu::Buffer& y = output(n.out, ctx);
        gpu::add(*dev_, s, a, b, y, rows * width);
        written(n.out);
        break;
      }
      case Op::swiglu: {
        const gpu::Buffer& g = input(n.in[0], ctx);
        const gpu::Buffer& u = input(n.in[1], ctx);
        const gpu::Buffer& y = output(n.out, ctx);
        gpu::swiglu(*dev_, s, g, u, y, rows * width);
        written(n.out);
        break;
      }
      case Op::attention: run_attention(n, ctx); break;
      case Op::moe: run_moe(n, ctx); break;
      default: throw gpu::GpuError(std::string("internal: no GPU op ") + op_name(n.op));
    }
  }

  // The batch's positions, the cache blocks its keys and values go to, the
  // block tables of its sequences and RoPE tables, uploaded once per batch;
  // offsets and tables twice when the cache has rings (kind 1: a ringed
  // layer's, KvCache::blocks(); kind 0: the pool's).
  void upload_batch(RunContext& ctx) {
    if (batch_uploaded_) return;
    const Batch& b = *ctx.batch;
    const int64_t n = b.size();
    const KvCache& kv = *ctx.kv;
    const int kinds = kv.ring_blocks() > 0 ? 2 : 1;
    block_tables_.clear();
    gpu::Stream& s = stream();
    ensure(pos_, n * 4, "positions", &ctx);
    s.upload(*pos_, b.pos.data(), n * 4);
    if (!key_stages_.empty()) {
      ensure(seq_, n * 4, "sequences", &ctx);
      s.upload(*seq_, b.seq.data(), n * 4);
    }
    for (int kind = 0; kind < kinds; ++kind) {
      // The first layer of this kind stands for all of them: their tables are the
      // same. A kind may have none (Mistral-style: every layer windowed, hence ringed).
      int64_t layer = 0;
      while (layer < spec_.n_layer && kv.ringed(layer) != (kind == 1)) ++layer;
      if (layer == spec_.n_layer) continue;
      std::vector<uint32_t>& base = base_[kind];
      base.resize(static_cast<size_t>(n));
      table_at_[kind].assign(static_cast<size_t>(kv.n_seq()), -1);
      for (int64_t t = 0; t < n; ++t) {
        const int32_t* table = kv.blocks(layer, b.seq[t]);
        base[t] = static_cast<uint32_t>(table[b.pos[t] / KvCache::kBlock] * kv.block_bytes());
        int64_t& at = table_at_[kind][static_cast<size_t>(b.seq[t])];
        if (at >= 0) continue;
        at = static_cast<int64_t>(block_tables_.size());
        const int64_t len = kind == 1 ? KvCache::blocks_for(kv.n_ctx()) : static_cast<int64_t>(kv.table(b.seq[t]).size());
        block_tables_.insert(block_tables_.end(), table, table + len);
      }
      ensure(base_buf_[kind], n * 4, "cache offsets", &ctx);
      s.upload(*base_buf_[kind], base.data(), n * 4);
    }
    if (block_tables_.empty()) block_tables_.push_back(0);
    ensure(block_tables_buf_, block_tables_.size() * 4, "block tables", &ctx);
    s.upload(*block_tables_buf_, block_tables_.data(), block_tables_.size() * 4);
    for (RopeTable& t : rope_tables_) t.current = false;
    batch_uploaded_ = true;
  }
  // The batch's RoPE cos/sin tables for p's base and scale: one per pair the
  // graph uses (Gemma 3's local and global layers differ), made once a batch.
  const gpu::Buffer& batch_tables(RunContext& ctx, const RopeParams& p) {
    upload_batch(ctx);
    auto it = std::find_if(rope_tables_.begin(), rope_tables_.end(),
                           [&](const RopeTable& t) { return t.theta == p.theta_base && t.scale == p.freq_scale; });
    if (it == rope_tables_.end()) it = rope_tables_.insert(rope_tables_.end(), RopeTable{p.theta_base, p.freq_scale, nullptr, false});
    if (!it->current) {
      const std::vector<float> cs = rope_tables(ctx.batch->pos.data(), ctx.batch->size(), p);
      ensure(it->buf, cs.size() * 4, "RoPE tables", &ctx);
      stream().upload(*it->buf, cs.data(), cs.size() * 4);
      it->current = true;
    }
    return *it->buf;
  }

  void run_attention(const Node& n, RunContext& ctx) {
    const Batch& b = *ctx.batch;
    const int64_t rows = b.size(), qd = spec_.q_dim(), kvd = spec_.kv_dim();
    upload_batch(ctx);
    const gpu::Buffer& q = input(n.in[0], ctx);
    const gpu::Buffer& k = input(n.in[1], ctx);
    const gpu::Buffer& v = input(n.in[2], ctx);
    const gpu::Buffer& o = output(n.out, ctx);
    const gpu::Buffer& kc = *keys_[static_cast<size_t>(n.layer)];
    const gpu::Buffer& vc = *values_[static_cast<size_t>(n.layer)];
    const int64_t block_bytes = ctx.kv->block_bytes();
    const KvType type = ctx.kv->type();
    gpu::Stream& s = stream();
    const int kind = ctx.kv->ringed(n.layer) ? 1 : 0;
    gpu::KvStoreOp store{&k, &v, pos_.get(), base_buf_[kind].get(), &kc, &vc, rows, kvd, spec_.head_dim, type};
    if (!key_stages_.empty()) {  // q4 keys: each sequence's group so far, where the stage lacks it (as the CPU's store does)
      store.stage = key_stages_[static_cast<size_t>(n.layer)].get();
      store.seq = seq_.get();
      gpu::kv_stage_fill(s, *store.stage, *ctx.kv, n.layer, b.seq.data(), b.pos.data(), rows);
    }
    gpu::kv_store(*dev_, s, store);
    // The same rows for the CPU's cache, stored when they come back (flush).
    PendingKv& p = pending_kv_.emplace_back();
    p.kv = ctx.kv;
    p.layer = n.layer;
    p.seq.assign(b.seq.begin(), b.seq.end());
    p.pos.assign(b.pos.begin(), b.pos.end());
    p.k.resize(static_cast<size_t>(rows * kvd));
    p.v.resize(static_cast<size_t>(rows * kvd));
    s.download(k, p.k.data(), p.k.size() * 4);
    s.download(v, p.v.data(), p.v.size() * 4);
    const gpu::Buffer& partial = ensure(partial_, gpu::attention_partial_bytes(spec_.head_dim), "attention partials", &ctx);
    for (int64_t t0 = 0; t0 < rows;) {  // runs of one sequence's tokens
      int64_t t1 = t0 + 1, max_pos = b.pos[t0];
      for (; t1 < rows && b.seq[t1] == b.seq[t0]; ++t1) max_pos = std::max<int64_t>(max_pos, b.pos[t1]);
      gpu::AttentionOp op{&q, t0 * qd, qd, &kc, &vc, type, block_tables_buf_.get(), table_at_[kind][static_cast<size_t>(b.seq[t0])],
                          block_bytes, pos_.get(), t0, &o,
                          t0 * qd, qd, t1 - t0, spec_.n_head, spec_.n_head_kv, spec_.head_dim,
                          spec_.window_of(n.layer), &partial, max_pos,
                          spec_.query_scale()};
      op.sinks = spec_.sinks_of(n.layer);
      op.softcap = spec_.attn_softcap;
      gpu::attention(*dev_, s, op);
      t0 = t1;
    }
    // q4 values are stored rotated (kv_rotation.h): the output rotated back.
    if (kv_side_type(type, 1) == KvType::q4) gpu::kv_rotate_rows(*dev_, s, o, 0, qd, rows, spec_.n_head, spec_.head_dim);
    written(n.out);
  }

  // MoE, all on the device: the router's logits, the route (each token's
  // top k, rows grouped by expert), every expert's gate and up in one
  // dispatch each, one SwiGLU, down, and each token's weighted sum.
  void run_moe(const Node& n, RunContext& ctx) {
    const MoeWeights& m = *n.moe;
    const int64_t rows = ctx.rows(n.out), d = ctx.width(n.out), E = m.n_expert, K = m.n_used, F = m.n_ff, T = rows * K;
    const gpu::Buffer& x = input(n.in[0], ctx);
    const gpu::Buffer& logits = ensure(router_logits_, static_cast<size_t>(rows * E) * 4, "router logits", &ctx);
    const gpu::Buffer& route = ensure(route_, gpu::moe_route_words(rows, E, K) * 4, "expert routes", &ctx);
    const gpu::Buffer& gb = ensure(expert_gate_, static_cast<size_t>(T * F) * 4, "expert gates", &ctx);
    const gpu::Buffer& ub = ensure(expert_up_, static_cast<size_t>(T * F) * 4, "expert ups", &ctx);
    const gpu::Buffer& eb = ensure(expert_y_, static_cast<size_t>(T * d) * 4, "expert outputs", &ctx);
    const gpu::Buffer& y = output(n.out, ctx);
    gpu::Stream& s = stream();
    gpu::matmul(*dev_, s, {&matrices_.at(m.router), 0, &x, 0, d, &logits, 0, E, rows});
    gpu::moe_route(*dev_, s, logits, route, rows, E, K);
    gpu::grouped_matmul(*dev_, s, {&matrices_.at(m.gate), &route, E, rows, K, true, &x, d, &gb, F});
    gpu::grouped_matmul(*dev_, s, {&matrices_.at(m.up), &route, E, rows, K, true, &x, d, &ub, F});
    gpu::swiglu(*dev_, s, gb, ub, gb, T * F);
    gpu::grouped_matmul(*dev_, s, {&matrices_.at(m.down), &route, E, rows, K, false, &gb, F, &eb, d});
    gpu::moe_combine(*dev_, s, eb, route, y, 0, d, rows, d, E, K);
    written(n.out);
  }

  gpu::Stream& stream() {
    if (!stream_) stream_ = std::make_unique<gpu::Stream>(*dev_);
    return *stream_;
  }

  // Keys and values of one attention node, on their way back to the CPU's cache.
  struct PendingKv {
    KvCache* kv;
    int64_t layer;
    std::vector<int32_t> seq, pos;
    std::vector<float> k, v;
  };

  std::unique_ptr<gpu::Device> dev_;
  const ModelSpec& spec_;
  Placement placement_;
  int gpu_layers_;
  bool failed_ = false;
  int64_t fail_after_ = -1, nodes_run_ = 0;  // BASALT_GPU_FAIL_AFTER=N: a lost device after N nodes
  std::unordered_map<const Weight*, gpu::GpuMatrix> matrices_;
  std::unordered_map<const std::vector<float>*, std::unique_ptr<gpu::Buffer>> vectors_;  // norm weights, biases
  std::vector<std::unique_ptr<gpu::Buffer>> keys_, values_;  // per layer: the cache's blocks, all sequences
  std::vector<std::unique_ptr<gpu::Buffer>> key_stages_;     // per layer, q4 keys: the groups being written (gpu::KvStoreOp)
  std::vector<KvBlockCopy> kv_copies_;                         // for the next batch
  uint64_t weight_bytes_ = 0;
  int moe_layers_ = 0;  // whose router and experts are on the device
  std::unique_ptr<gpu::Stream> stream_;
  std::vector<DeviceTensor> tensors_;
  std::vector<PendingKv> pending_kv_;
  bool batch_uploaded_ = false;
  std::unique_ptr<gpu::Buffer> pos_, seq_, base_buf_[2], block_tables_buf_, partial_, router_logits_, route_, expert_gate_, expert_up_,
      expert_y_;
  struct RopeTable {
    float theta, scale;
    std::unique_ptr<gpu::Buffer> buf;
    bool current;  // made for this batch
  };
  std::vector<RopeTable> rope_tables_;
  std::vector<uint32_t> base_[2];         // per token: its block's offset in a layer's keys (values), of each kind
  std::vector<int32_t> block_tables_;     // of the batch's sequences, each once per kind
  std::vector<int64_t> table_at_[2];      // per kind and sequence: where its table starts in block_tables_ (-1: not in the batch)
};

std::unique_ptr<Backend> make_vulkan_backend(const BackendRequest& r, std::string* plan) {
  const Graph& graph = r.graph;
  const Model& model = r.model;
  const KvCache& kv = r.kv;
  const OffloadOptions& options = r.offload;
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
  try {
    std::unique_ptr<gpu::Device> device = gpu::Device::open(index);
    if (p.auto_pick) {  // both sides measured, then estimated
      Throughputs t;
      if (const double host_gbs = r.host ? r.host->measure_read_gbs() : 0; host_gbs > 0) t.cpu_read_gbs = host_gbs;
      gpu::measure_device(*device, t);
      const AutoPlan a = choose_auto(device->info(), model.spec(), graph, kv.n_ctx(), t,
                                     static_cast<uint64_t>(options.memory_mib) << 20, kv.type());
      if (!a.placement.any()) {
        *plan = "GPU " + device->info().name + ": auto: " + a.why + "; running on the CPU";
        return nullptr;
      }
      p = a.placement;
      auto_why = " (auto: " + a.why + ")";
    }
    auto backend = std::make_unique<VulkanBackend>(std::move(device), graph, model.spec(), kv, p, options.gpu_layers,
                                                   options.memory_mib);
    *plan = backend->plan() + auto_why;
    if (!backend->offloads_anything()) return nullptr;
    return backend;
  } catch (const gpu::GpuError& e) {
    *plan = std::string("GPU: ") + e.what() + "; running on the CPU";
    return nullptr;
  }
}
}  // namespace

BackendFactory vulkan_backend_factory() { return {"vulkan", /*host=*/false, make_vulkan_backend}; }

}  // namespace basalt
