// SPDX-License-Identifier: MIT
// A backend runs the nodes it supports. The executor asks supports() and
// hands each node to a backend; the host backend (the CPU) supports every node.
// Backends reach the executor through the registry (core/backend/registry.h).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/error.h"
#include "core/graph/graph.h"
#include "core/model/model_spec.h"
#include "core/graph/batch.h"
#include "core/graph/kv_cache.h"

namespace basalt {

struct RunContext {
  const Graph* graph;
  const Batch* batch;
  const ModelSpec* spec;
  KvCache* kv;
  std::vector<float*> buffers;     // per tensor: [rows][width]
  std::vector<int32_t> out_rows;   // batch rows that want logits, in order
  // Called by MoE ops with each expert's inputs (which 0: its gate/up input
  // [rows][n_embd], 1: its down input [rows][n_ff]); empty: none. The quantizer's.
  std::function<void(int layer, int64_t expert, int which, const float* x, int64_t rows)> expert_inputs;

  float* buf(int tensor) const { return buffers[static_cast<size_t>(tensor)]; }
  int64_t width(int tensor) const { return graph->tensors[static_cast<size_t>(tensor)].width; }
  int64_t rows(int tensor) const {
    return graph->tensors[static_cast<size_t>(tensor)].output_rows ? static_cast<int64_t>(out_rows.size()) : batch->size();
  }
};

// A backend that can no longer run (a lost GPU), perhaps in the middle of a
// batch and holding data nobody else has: the executor drops it, places its
// nodes on the others and runs the batch again.
class BackendFailed : public Error {
 public:
  using Error::Error;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual bool supports(const Node& node) const = 0;
  // Called before the nodes of a batch run (a backend may drop cached state).
  virtual void begin_batch(RunContext& ctx) {}
  virtual void run(const Node& node, RunContext& ctx) = 0;
  // Another backend wrote the tensor: drop anything derived from its old contents.
  virtual void invalidate(int tensor) {}
  // Someone else is about to read the tensor from RunContext::buf: if this
  // backend holds its newest contents elsewhere (a GPU), it copies them there now.
  virtual void sync_to_host(int tensor, RunContext& ctx) {}
  // The KV cache copied a block (KvCache::copy_block): a backend holding its
  // own copy of the cache does the same before its next batch.
  virtual void copy_kv_block(const KvBlockCopy& copy) {}
  // False once the backend has failed (after it threw BackendFailed).
  virtual bool healthy() const { return true; }
  // The memory read bandwidth its kernels see, in GB/s, measured now (a few
  // ms); 0 when unknown. What --gpu auto weighs the host against.
  virtual double measure_read_gbs() { return 0; }
};

}  // namespace basalt
