// SPDX-License-Identifier: MIT
// BASALT_PROFILE=1: wall time per op (matmuls per weight role, e.g.
// "matmul ffn_up"), summed over the process and printed to stderr at exit.
// Where a prefill or decode step spends its time, without a profiler.
#pragma once

#include "core/graph/graph.h"

namespace basalt {

class OpProfile {
 public:
  // nullptr unless BASALT_PROFILE is set (the executor then times each node).
  static OpProfile* get();
  virtual void add(const Node& n, double seconds) = 0;

 protected:
  ~OpProfile() = default;
};

}  // namespace basalt
