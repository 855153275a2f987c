// SPDX-License-Identifier: MIT
// The CPU backend: runs every op, with the kernels of the selected ISA.
#pragma once

#include <memory>

#include "core/graph/backend.h"

namespace basalt {

class Model;
std::unique_ptr<Backend> make_cpu_backend(const Model& model);

}  // namespace basalt
