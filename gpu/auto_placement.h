// SPDX-License-Identifier: MIT
// What --gpu auto offloads: the whole model when it fits the device and the
// estimate of one decode step at half the context says the GPU is clearly
// faster; else, for each kind of work (attention, MoE experts), the same
// estimate per kind, transfers and per-node submission included. Never
// slower than the CPU alone by its own estimate.
#pragma once

#include <string>

#include "core/graph/graph.h"
#include "core/graph/offload.h"
#include "core/model/model_spec.h"
#include "core/graph/kv_cache.h"
#include "gpu/device.h"

namespace basalt::gpu {

// The figures the estimate uses (GB/s, microseconds).
struct Throughputs {
  double cpu_read_gbs = 20;   // the host's memory read bandwidth (its backend's measure_read_gbs())
  double gpu_read_gbs = 0;    // the device's memory; 0: guessed from its kind
  double link_gbs = 0;        // host -> device copies; 0: guessed from its kind
  double node_us = 60;        // one offloaded node's submit and wait (its input comes from the CPU)
  // One more dispatch inside a submission: its recording on the host and its
  // launch and barrier on the device. A whole model is hundreds of them a
  // token: an H200 took 3.5 ms a decode token whose reads it estimated at
  // 0.27 ms, ~10 us a node (docs/PERFORMANCE.md 4.1), hence the default.
  double dispatch_us = 10;
};

struct AutoPlan {
  Placement placement;  // attn and/or experts, or nothing
  std::string why;      // the estimates, for the plan line
};

// budget_bytes: what the device may hold (0: 80% of its memory).
AutoPlan choose_auto(const GpuInfo& gpu, const ModelSpec& spec, const Graph& graph, int64_t n_ctx, Throughputs t,
                     uint64_t budget_bytes = 0, KvType kv_type = KvType::f16);

// The device's side, measured (tens of ms on a GPU): its read bandwidth
// (shaders/read_bandwidth.comp over up to 256 MiB), host -> device copies,
// the submit-and-wait of one small dispatch, and what each further dispatch
// of a submission adds. Throws GpuError.
void measure_device(Device& device, Throughputs& t);

}  // namespace basalt::gpu
