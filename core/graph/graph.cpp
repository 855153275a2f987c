// SPDX-License-Identifier: MIT
#include "core/graph/graph.h"

namespace basalt {

const char* op_name(Op op) {
  static const char* names[] = {
#define BASALT_OP_NAME(name) #name,
      BASALT_OPS(BASALT_OP_NAME)
#undef BASALT_OP_NAME
  };
  return names[static_cast<int>(op)];
}

int Graph::add_tensor(std::string name, int64_t width, bool output_rows) {
  tensors.push_back({std::move(name), width, output_rows});
  return static_cast<int>(tensors.size()) - 1;
}

Node& Graph::add(Op op, int out, std::initializer_list<int> in) {
  Node n;
  n.op = op;
  n.out = out;
  n.layer = current_layer;
  int i = 0;
  for (int t : in) n.in[i++] = t;
  nodes.push_back(n);
  return nodes.back();
}

}  // namespace basalt
