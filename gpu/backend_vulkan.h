// SPDX-License-Identifier: MIT
// The Vulkan backend of the executor: runs the nodes the placement gives it
// (attention, matmuls) on a GPU, the rest stays on the CPU backend.
#pragma once

#include <memory>
#include <string>

#include "core/graph/backend.h"
#include "core/graph/offload.h"

namespace basalt {

class Model;

// The backend for the placement asked, or nullptr when nothing goes to a GPU
// (no device, no loader, a CPU driver under auto). *plan says what was
// chosen and why, in one line, for the user. Built only with Vulkan
// (BASALT_VULKAN); the executor says so otherwise.
std::unique_ptr<Backend> make_vulkan_backend(const Graph& graph, const Model& model, const KvCache& kv,
                                             const OffloadOptions& options, std::string* plan);

}  // namespace basalt
