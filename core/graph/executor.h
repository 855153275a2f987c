// SPDX-License-Identifier: MIT
// Runs a model's graph for one batch at a time. Buffers are planned once for
// the largest batch (the micro-batch size): no allocation per batch.
#pragma once

#include <memory>
#include <vector>

#include "core/graph/backend.h"
#include "core/graph/graph.h"
#include "core/model/model.h"
#include "core/runtime/batch.h"
#include "core/runtime/kv_cache.h"
#include "quant/weight.h"

namespace basalt {

class Executor {
 public:
  Executor(const Model& model, KvCache& kv, int64_t max_batch);
  ~Executor();

  // Runs the batch; returns logits [batch.n_outputs()][n_vocab], valid until
  // the next run. Error if the batch is larger than max_batch, a token is out
  // of the vocabulary or a position is out of the cache.
  const float* run(const Batch& batch);

  int64_t max_batch() const { return max_batch_; }
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
};

}  // namespace basalt
