// SPDX-License-Identifier: MIT
#include "gpu/auto_placement.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unordered_set>
#include <vector>

#include "core/graph/kv_cache.h"
#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "gpu/stream.h"

namespace basalt::gpu {

namespace {

// Guesses where the driver tells nothing: a discrete GPU's own memory and
// PCIe; an integrated GPU shares the CPU's memory.
void fill_guesses(const GpuInfo& gpu, Throughputs& t) {
  const bool discrete = gpu.kind == GpuKind::discrete;
  if (t.gpu_read_gbs <= 0) t.gpu_read_gbs = discrete ? 300 : t.cpu_read_gbs;
  if (t.link_gbs <= 0) t.link_gbs = discrete ? 12 : t.cpu_read_gbs / 2;
}

std::string fixed(double v, const char* unit) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f %s", v < 10 ? 1 : 0, v, unit);
  return buf;
}

std::string ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", us / 1000);
  return buf;
}

struct Estimate {
  double cpu_us = 0, gpu_us = 0;
  bool gpu_wins() const { return gpu_us < 0.8 * cpu_us; }  // a margin for the estimate's error
};

}  // namespace

AutoPlan choose_auto(const GpuInfo& gpu, const ModelSpec& spec, const Graph& graph, int64_t n_ctx, Throughputs t,
                     uint64_t budget_bytes, KvType kv_type) {
  fill_guesses(gpu, t);
  const double us_per_byte_cpu = 1e-3 / t.cpu_read_gbs, us_per_byte_gpu = 1e-3 / t.gpu_read_gbs,
               us_per_byte_link = 1e-3 / t.link_gbs;
  Estimate attn, experts, all;
  const double depth = static_cast<double>(std::max<int64_t>(1, n_ctx / 2));
  // One layer's keys and values of one position, in the cache's type.
  const double kv_position = static_cast<double>(KvCache::position_bytes(spec.n_head_kv, spec.head_dim, kv_type));
  // Per kind of work (attention, experts), and for the whole model: every
  // weight and the KV cache's copy on the device; a decode step reads the
  // dense weights, the chosen experts' share and the cache, with one upload
  // (an embedding row), one download (the logits) and one submission.
  std::unordered_set<const Weight*> seen;
  double resident = 0, step = 0;
  auto weight = [&](const Weight* w, double share) {
    if (!w || !seen.insert(w).second) return;
    resident += static_cast<double>(w->total_bytes());
    step += static_cast<double>(w->total_bytes()) * share;
  };
  for (const Node& n : graph.nodes) {
    if (n.op == Op::matmul) weight(n.weight, 1.0);
    if (n.op == Op::attention) {
      // Decode reads the cache once; the GPU also receives q and the touched block, and returns o.
      const double kv_bytes = depth * kv_position;
      const double moved = 2.0 * spec.q_dim() * 4 + kv_position * KvCache::kBlock;
      attn.cpu_us += kv_bytes * us_per_byte_cpu;
      attn.gpu_us += kv_bytes * us_per_byte_gpu + moved * us_per_byte_link + t.node_us;
      resident += static_cast<double>(n_ctx) * kv_position;
      step += kv_bytes;
    }
    if (n.op == Op::moe) {
      const MoeWeights& m = *n.moe;
      const double used = static_cast<double>(m.n_used) / static_cast<double>(m.n_expert);
      const double bytes = static_cast<double>(m.gate->total_bytes() + m.up->total_bytes() + m.down->total_bytes()) * used;
      const double moved = static_cast<double>(m.n_used) * 2 * static_cast<double>(spec.n_embd) * 4;
      experts.cpu_us += bytes * us_per_byte_cpu;
      experts.gpu_us += bytes * us_per_byte_gpu + moved * us_per_byte_link + t.node_us;
      weight(m.router, 1.0);
      for (const Weight* w : {m.gate, m.up, m.down}) weight(w, used);
    }
  }
  if (budget_bytes == 0) budget_bytes = gpu.device_local_bytes / 10 * 8;
  if (step > 0 && resident <= static_cast<double>(budget_bytes)) {
    all.cpu_us = step * us_per_byte_cpu;
    all.gpu_us = step * us_per_byte_gpu + (spec.n_embd + spec.n_vocab) * 4.0 * us_per_byte_link + t.node_us +
                 static_cast<double>(graph.nodes.size()) * t.dispatch_us;  // a dispatch a node, roughly
  }
  AutoPlan plan;
  if (all.cpu_us > 0 && all.gpu_wins()) {
    plan.placement.all = true;
    plan.why = "the whole model on the GPU (est. " + ms(all.gpu_us) + " GPU vs " + ms(all.cpu_us) + " CPU per token)";
  } else {
    plan.placement.attn = attn.cpu_us > 0 && attn.gpu_wins();
    plan.placement.experts = experts.cpu_us > 0 && experts.gpu_wins();
    if (all.cpu_us <= 0 && step > 0)
      plan.why = "the whole model does not fit (" + fixed(resident / (1 << 30), "GiB") + " of " +
                 fixed(static_cast<double>(budget_bytes) / (1 << 30), "GiB") + ")";
  }
  auto say = [&](const char* what, const Estimate& e, bool chosen) {
    if (e.cpu_us <= 0) return;
    if (!plan.why.empty()) plan.why += "; ";
    plan.why += std::string(what) + (chosen ? " on the GPU" : " on the CPU") + " (est. " + ms(e.gpu_us) + " GPU vs " +
                ms(e.cpu_us) + " CPU per token)";
  };
  if (!plan.placement.all) {
    say("attention", attn, plan.placement.attn);
    say("experts", experts, plan.placement.experts);
  }
  if (plan.why.empty()) plan.why = "nothing to offload";
  plan.why += "; GPU reads " + fixed(t.gpu_read_gbs, "GB/s") + ", copies " + fixed(t.link_gbs, "GB/s") + ", syncs in " +
              fixed(t.node_us, "us") + ", dispatches in " + fixed(t.dispatch_us, "us") + "; CPU reads " +
              fixed(t.cpu_read_gbs, "GB/s");
  return plan;
}

void measure_device(Device& device, Throughputs& t) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const GpuInfo& info = device.info();
  size_t bytes = std::min<size_t>(size_t{256} << 20, info.max_storage_range / 2);
  if (info.device_local_bytes) bytes = std::min<size_t>(bytes, info.device_local_bytes / 8);
  bytes &= ~size_t{15};
  Buffer src(device, bytes, Memory::device, "bandwidth probe"), sums(device, 1024 * 256 * 4, Memory::device, "probe sums");
  Stream s(device);
  s.fill_zero(src, 0, bytes);
  s.finish();
  // Submit and wait of one small dispatch: the best of a few.
  const uint32_t one = 1;
  const Pipeline& read = device.pipeline({"read_bandwidth", 2, 4, {}});
  double sync = 1e9;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    s.dispatch(read, {in(src), out(sums)}, &one, 4, {1, 1, 1});
    s.finish();
    sync = std::min(sync, seconds(t0));
  }
  t.node_us = sync * 1e6;
  // Dispatches in one submission, each writing what the last one wrote (a
  // barrier between them, as between a model's nodes): what one more adds.
  constexpr int kDispatches = 64;
  double batch = 1e9;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    for (int j = 0; j < kDispatches; ++j) s.dispatch(read, {in(sums), out(src)}, &one, 4, {1, 1, 1});
    s.finish();
    batch = std::min(batch, seconds(t0));
  }
  t.dispatch_us = std::max(0.0, batch - sync) * 1e6 / (kDispatches - 1);
  // Read bandwidth: the best of 3 submissions of 4 passes.
  const uint32_t n_vec4 = static_cast<uint32_t>(bytes / 16);
  double read_s = 1e9;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    for (int j = 0; j < 4; ++j) s.dispatch(read, {in(src), out(sums)}, &n_vec4, 4, {1024, 1, 1});
    s.finish();
    read_s = std::min(read_s, seconds(t0) / 4);
  }
  t.gpu_read_gbs = static_cast<double>(bytes) / read_s / 1e9;
  // Host -> device copies (through the stream's staging memory, as activations go).
  const size_t copy = std::min<size_t>(bytes, size_t{32} << 20);
  std::vector<uint8_t> host(copy, 1);
  double copy_s = 1e9;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    s.upload(src, host.data(), copy);
    s.finish();
    copy_s = std::min(copy_s, seconds(t0));
  }
  t.link_gbs = static_cast<double>(copy) / copy_s / 1e9;
}

}  // namespace basalt::gpu
