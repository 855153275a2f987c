// SPDX-License-Identifier: MIT
// Assembles the engine: registers the backends this build has (the CPU, and
// Vulkan where built with it) with the runtime's registry. Call it once before
// the first Executor or Session; calling it again does nothing new.
#pragma once

namespace basalt {

void register_builtin_backends();

}  // namespace basalt
