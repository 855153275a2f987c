// SPDX-License-Identifier: MIT
// The backends the executor may use, registered by whoever assembles the
// engine (core/engine/builtin_backends.h), so that the runtime never names a
// backend and cpu/ and gpu/ never name each other.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/graph/kv_cache.h"
#include "core/graph/offload.h"

namespace basalt {

class Model;

// What a factory gets to decide whether, and for which nodes, it makes a backend.
struct BackendRequest {
  const Graph& graph;
  const Model& model;
  const KvCache& kv;
  const OffloadOptions& offload;
  Backend* host = nullptr;  // the host backend, already made (nullptr while making it)
};

struct BackendFactory {
  std::string name;
  bool host = false;  // runs every op: the executor's last resort (the CPU); exactly one
  // A backend, or nullptr when it has nothing to do here (no device, nothing
  // asked). *plan: one line for the user about what it chose and why ("" says nothing).
  std::function<std::unique_ptr<Backend>(const BackendRequest&, std::string* plan)> make;
};

// Adds a factory (replacing one of the same name). Offload backends are
// asked in the order they were registered; the first that supports a node runs it.
void register_backend(BackendFactory factory);
std::vector<BackendFactory> registered_backends();

}  // namespace basalt
