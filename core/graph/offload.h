// SPDX-License-Identifier: MIT
// What the user asked to run on a GPU (--gpu, --gpu-device, --gpu-layers, --gpu-memory).
#pragma once

#include <cstdint>
#include <string>

namespace basalt {

struct OffloadOptions {
  // off | auto | all | a comma list of attn, experts
  std::string gpu = "off";
  int device = -1;      // --gpu-device: index in the driver's list; -1: the best one
  int gpu_layers = -1;  // offload only blocks [0, gpu_layers); -1: all
  int64_t memory_mib = 0;  // --gpu-memory: the most basalt puts on the device; 0: 80% of its memory
};

struct Placement {
  bool attn = false, experts = false, all = false, auto_pick = false;
  bool any() const { return attn || experts || all || auto_pick; }
};

// Error (core/error.h) naming the bad item.
Placement parse_placement(const std::string& gpu);

}  // namespace basalt
