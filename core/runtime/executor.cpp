// SPDX-License-Identifier: MIT
#include "core/runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <utility>
#include <vector>

#include "core/backend/registry.h"
#include "core/error.h"
#include "core/runtime/profile.h"

namespace basalt {

Executor::Executor(const Model& model, KvCache& kv, int64_t max_batch, const OffloadOptions& offload)
    : model_(model), kv_(kv), max_batch_(max_batch), graph_(build_graph(model)) {
  if (max_batch <= 0) throw Error("the micro-batch size must be positive");
  for (const TensorDesc& t : graph_.tensors)
    buffers_.push_back(aligned_alloc_bytes(static_cast<size_t>(max_batch) * t.width * sizeof(float)));
  ctx_.graph = &graph_;
  ctx_.spec = &model_.spec();
  ctx_.kv = &kv_;
  for (auto& b : buffers_) ctx_.buffers.push_back(reinterpret_cast<float*>(b.get()));
  // The host backend (it runs every op) last; offload backends before it, in
  // the registry's order, where one was asked for and works.
  const std::vector<BackendFactory> factories = registered_backends();
  auto host = std::find_if(factories.begin(), factories.end(), [](const BackendFactory& f) { return f.host; });
  if (host == factories.end())
    throw Error("no host backend registered: call register_builtin_backends() (core/engine/builtin_backends.h) first");
  BackendRequest request{graph_, model_, kv_, offload, nullptr};
  std::string unused;
  std::unique_ptr<Backend> host_backend = host->make(request, &unused);
  request.host = host_backend.get();
  bool offload_registered = false;
  for (const BackendFactory& f : factories) {
    if (f.host) continue;
    offload_registered = true;
    std::string plan;
    if (auto b = f.make(request, &plan)) backends_.push_back(std::move(b));
    if (!plan.empty()) offload_plan_ += (offload_plan_.empty() ? "" : "; ") + plan;
  }
  if (!offload_registered && parse_placement(offload.gpu).any())
    offload_plan_ = "this build has no GPU backend; running on the CPU";
  backends_.push_back(std::move(host_backend));
  place();
}

void Executor::place() {
  placement_.clear();
  for (const Node& n : graph_.nodes) {
    Backend* chosen = nullptr;
    for (auto& b : backends_)
      if (b->supports(n)) {
        chosen = b.get();
        break;
      }
    if (!chosen) throw Error(std::string("internal: no backend runs op ") + op_name(n.op));
    placement_.push_back(chosen);
  }
}

Executor::~Executor() {
  try {
    release_copy_sources();
  } catch (...) {  // a destructor must not throw; the cache goes with its owner
  }
}

void Executor::begin(const Batch& batch) {
  const int64_t n = batch.size();
  if (n == 0) throw Error("empty batch");
  if (n > max_batch_) throw Error("batch of " + std::to_string(n) + " tokens is larger than the micro-batch " + std::to_string(max_batch_));
  const int64_t n_vocab = model_.spec().n_vocab;
  for (int64_t i = 0; i < n; ++i) {
    if (batch.tokens[i] < 0 || batch.tokens[i] >= n_vocab)
      throw Error("token id " + std::to_string(batch.tokens[i]) + " is outside the vocabulary (" + std::to_string(n_vocab) + ")");
    if (batch.pos[i] < 0 || batch.pos[i] >= kv_.n_ctx())
      throw Error("position " + std::to_string(batch.pos[i]) + " is outside the context (" + std::to_string(kv_.n_ctx()) + " tokens)");
    if (batch.seq[i] < 0 || batch.seq[i] >= kv_.n_seq()) throw Error("sequence id " + std::to_string(batch.seq[i]) + " out of range");
    if (batch.pos[i] >= kv_.capacity(batch.seq[i]))  // a paged cache: the caller grows the table first
      throw Error("internal: position " + std::to_string(batch.pos[i]) + " of sequence " + std::to_string(batch.seq[i]) +
                  " has no KV block");
  }
  if (!kv_.hold_windows(batch))  // a scheduler holds them first, freeing ring blocks as needed
    throw Error("internal: too few free ring blocks for the sliding-window layers of the batch");
  ctx_.batch = &batch;
  ctx_.out_rows.clear();
  for (int64_t i = 0; i < n; ++i)
    if (batch.want_logits[i]) ctx_.out_rows.push_back(static_cast<int32_t>(i));
  for (auto& b : backends_) b->begin_batch(ctx_);
}

void Executor::run_nodes(size_t begin, size_t end) {
  OpProfile* profile = OpProfile::get();
  for (size_t i = begin; i < end; ++i) {
    const Node& n = graph_.nodes[i];
    if (backends_.size() > 1) {  // its inputs' newest contents where it reads them
      for (int t : n.in)
        if (t >= 0) sync_for(placement_[i], t);
      if (before_node_) sync_for(nullptr, -1);
    }
    if (before_node_) before_node_(i, ctx_);
    const auto t0 = std::chrono::steady_clock::now();
    placement_[i]->run(graph_.nodes[i], ctx_);
    if (profile)
      profile->add(graph_.nodes[i], ctx_.batch->size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (backends_.size() > 1)
      for (auto& b : backends_)
        if (b.get() != placement_[i]) b->invalidate(graph_.nodes[i].out);
  }
}

const float* Executor::run(const Batch& batch) {
  try {
    try {
      begin(batch);
      run_nodes(0, graph_.nodes.size());
      sync_for(nullptr, graph_.logits);
    } catch (const BackendFailed&) {
      // A backend is gone, perhaps mid-batch: without it, the whole batch again.
      // The cache writes are idempotent (same positions, same values).
      drop_failed_backends();
      begin(batch);
      run_nodes(0, graph_.nodes.size());
      sync_for(nullptr, graph_.logits);
    }
  } catch (...) {
    release_copy_sources();
    throw;
  }
  release_copy_sources();  // the backends copied them before this batch's writes
  return ctx_.buf(graph_.logits);
}

void Executor::drop_failed_backends() {
  const Backend* host = backends_.back().get();
  std::erase_if(backends_, [&](const std::unique_ptr<Backend>& b) { return b.get() != host && !b->healthy(); });
  place();
}

void Executor::sync_for(const Backend* reader, int tensor) {
  if (backends_.size() < 2) return;
  for (auto& b : backends_) {
    if (b.get() == reader) continue;
    if (tensor >= 0) {
      b->sync_to_host(tensor, ctx_);
    } else {
      for (size_t t = 0; t < graph_.tensors.size(); ++t) b->sync_to_host(static_cast<int>(t), ctx_);
    }
  }
}

float* Executor::tensor(int t) {
  sync_for(nullptr, t);
  return ctx_.buf(t);
}

void Executor::copy_kv_block(int32_t src, int32_t dst) {
  const KvBlockCopy copy = kv_.copy_block(src, dst);
  if (!offloading()) return;  // the host's cache is the only one: copied now
  kv_.ref(src);
  if (copy.ring_src >= 0) kv_.ref_ring(src);
  pending_copies_.push_back(copy);
  for (auto& b : backends_) b->copy_kv_block(copy);
}

void Executor::release_copy_sources() {
  for (const KvBlockCopy& c : pending_copies_) {
    if (c.ring_src >= 0) kv_.unref_ring(c.src);
    kv_.unref(c.src);
  }
  pending_copies_.clear();
}

void Executor::run_layers(const Batch& batch, int first, int last) {
  if (first < 0 || last < first || last >= model_.spec().n_layer)
    throw Error("layers " + std::to_string(first) + ".." + std::to_string(last) + " out of range");
  begin(batch);
  // A block's nodes are contiguous, in order (the builders add them so).
  size_t b = 0;
  while (b < graph_.nodes.size() && graph_.nodes[b].layer < first) ++b;
  size_t e = b;
  while (e < graph_.nodes.size() && graph_.nodes[e].layer >= first && graph_.nodes[e].layer <= last) ++e;
  try {
    run_nodes(b, e);
    sync_for(nullptr, graph_.tokens_out);
  } catch (const BackendFailed&) {
    throw Error("the GPU failed while running layers " + std::to_string(first) + ".." + std::to_string(last));
  }
}

}  // namespace basalt
