// SPDX-License-Identifier: MIT
// The Vulkan backend of the executor: runs the nodes the placement gives it
// (attention, matmuls) on a GPU, the rest stays on the CPU backend.
#pragma once

#include "core/backend/registry.h"

namespace basalt {

// Makes the backend for the placement asked (--gpu), or nullptr when nothing
// goes to a GPU (no device, no loader, a CPU driver under auto); its plan says
// what was chosen and why, in one line, for the user. Built only with Vulkan
// (BASALT_VULKAN).
BackendFactory vulkan_backend_factory();

}  // namespace basalt
