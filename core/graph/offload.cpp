// SPDX-License-Identifier: MIT
#include "core/graph/offload.h"

#include <sstream>

#include "core/error.h"

namespace basalt {

Placement parse_placement(const std::string& gpu) {
  Placement p;
  if (gpu == "off" || gpu.empty()) return p;
  if (gpu == "auto") return p.auto_pick = true, p;
  if (gpu == "all") return p.all = true, p;
  std::stringstream ss(gpu);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "attn") p.attn = true;
    else if (item == "experts") p.experts = true;
    else throw Error("unknown GPU placement '" + item + "' (off, auto, all, or a list of attn,experts)");
  }
  return p;
}

}  // namespace basalt
