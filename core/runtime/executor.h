// SPDX-License-Identifier: MIT
// Runs a model's graph for one batch at a time. Buffers are planned once for
// the largest batch (the micro-batch size): no allocation per batch.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/backend/backend.h"
#include "core/graph/graph.h"
#include "core/graph/offload.h"
#include "core/model/model.h"
#include "core/graph/batch.h"
#include "core/graph/kv_cache.h"
#include "quant/weight.h"

namespace basalt {

class Executor {
 public:
  // offload: what to run on a GPU (nothing by default); offload_plan() says what was chosen.
  Executor(const Model& model, KvCache& kv, int64_t max_batch, const OffloadOptions& offload = {});
  ~Executor();

  // Runs the batch; returns logits [batch.n_outputs()][n_vocab], valid until
  // the next run. Error if the batch is larger than max_batch, a token is out
  // of the vocabulary or a position is out of the cache.
  const float* run(const Batch& batch);

  // Runs only the nodes of blocks [first, last] (the quantizer's layer-by-layer
  // calibration): the residual stream, tensor(graph().tokens_out), is read
  // before and holds the result after. Same errors as run().
  void run_layers(const Batch& batch, int first, int last);
  float* tensor(int t);  // [max_batch][width], its newest contents
  // Copies the cache's block src over block dst, wherever a copy of the cache
  // lives. A backend copies at its next batch: until that batch has run, src
  // (and its ring block) keeps a reference of the executor's, so that no one
  // frees it and takes it for another block first.
  void copy_kv_block(int32_t src, int32_t dst);

  // Called before each node runs (its index in graph().nodes); empty: none.
  using NodeHook = std::function<void(size_t node, const RunContext& ctx)>;
  void set_before_node(NodeHook hook) { before_node_ = std::move(hook); }
  // Called with each MoE expert's inputs (RunContext::expert_inputs); empty: none.
  void set_expert_inputs(decltype(RunContext::expert_inputs) hook) { ctx_.expert_inputs = std::move(hook); }

  int64_t max_batch() const { return max_batch_; }
  const std::string& offload_plan() const { return offload_plan_; }  // "" when nothing was asked
  bool offloading() const { return backends_.size() > 1; }            // some nodes run off the host
  const Graph& graph() const { return graph_; }

 private:
  const Model& model_;
  KvCache& kv_;
  int64_t max_batch_;
  Graph graph_;
  std::vector<AlignedBytes> buffers_;
  RunContext ctx_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<Backend*> placement_;  // per node
  NodeHook before_node_;
  std::string offload_plan_;
  std::vector<KvBlockCopy> pending_copies_;  // their sources' references, until the next batch has run

  void begin(const Batch& batch);
  void place();                 // each node on the first backend that supports it
  void drop_failed_backends();  // the unhealthy ones (never the host), then place() again
  // Backends other than reader copy their newer contents of tensor (all of them: -1) to the host.
  void sync_for(const Backend* reader, int tensor);
  void run_nodes(size_t begin, size_t end);
  void release_copy_sources();
};

}  // namespace basalt
