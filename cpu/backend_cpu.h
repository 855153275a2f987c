// SPDX-License-Identifier: MIT
// The CPU backend: runs every op, with the kernels of the selected ISA. The
// host backend of every executor.
#pragma once

#include "core/backend/registry.h"

namespace basalt {

BackendFactory cpu_backend_factory();

}  // namespace basalt
