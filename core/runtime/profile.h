// SPDX-License-Identifier: MIT
// BASALT_PROFILE=1: wall time per op (matmuls per weight role, e.g.
// "matmul ffn_up"), summed over the process and printed to stderr at exit,
// decode steps (one-token batches) apart from prefill.
// Where a prefill or decode step spends its time, without a profiler.
#pragma once

#include "core/graph/graph.h"

namespace basalt {

class OpProfile {
 public:
  // nullptr unless BASALT_PROFILE is set (the executor then times each node).
  static OpProfile* get();
  virtual void add(const Node& n, int64_t batch_tokens, double seconds) = 0;

 protected:
  ~OpProfile() = default;
};

}  // namespace basalt
