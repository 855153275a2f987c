// SPDX-License-Identifier: MIT
#include "core/engine/builtin_backends.h"

#include "core/backend/registry.h"
#include "cpu/backend_cpu.h"
#if defined(BASALT_VULKAN)
#include "gpu/backend_vulkan.h"
#endif

namespace basalt {

void register_builtin_backends() {
#if defined(BASALT_VULKAN)
  register_backend(vulkan_backend_factory());
#endif
  register_backend(cpu_backend_factory());
}

}  // namespace basalt
